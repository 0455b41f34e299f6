"""Running one agent call: its record, its permit, its attempts, its journaled result (spec J)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio

from piflow.config import CHILD_AGENT_TOOL
from piflow.config.resources import ResourcePolicy
from piflow.engine import events
from piflow.engine.backends.base import AttemptRequest, ProviderRateLimited, Usage
from piflow.engine.budgets import soft_instruction
from piflow.engine.children import ChildAgents
from piflow.engine.journal import OperationKind, conversation_name
from piflow.engine.lifecycle import AGENT_SETTLED, AgentState
from piflow.engine.prompts import attempt_prompt
from piflow.engine.resolution import AgentSpec, resolve_model
from piflow.engine.setup_hooks import SessionSetup, SetupFailed, apply_hooks, ordered, setup_summary
from piflow.engine.store import AgentRecord, AttemptRecord, AttemptSetup
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.runs import ActiveRun, GroupCommit

OUTCOME_CODES = frozenset({"AGENT_TIMEOUT", "AGENT_FAILED", "RESULT_INVALID"})
_NOT_RETRIED = frozenset({"CANCELLED", "WORKTREE_FAILED", "RESUME_INCOMPATIBLE", "BUDGET_EXHAUSTED"})


def schema_accepts(schema: dict[str, Any], value: Any) -> bool:
    """Check a result against its output schema (draft 7 unless the schema names another)."""
    from jsonschema import Draft7Validator  # ~50 ms to import: only runs whose agents have a schema pay it
    from jsonschema.validators import validator_for

    cls = validator_for(schema, default=Draft7Validator)
    return bool(cls(schema).is_valid(value))


def check_tool_budget(options: dict[str, Any], calls: int, name: str) -> None:
    """AGENT_FAILED when the `calls`-th tool call (to `name`) passes the agent's `toolBudget.hard`."""
    budget = options.get("toolBudget")
    hard = budget.get("hard") if isinstance(budget, dict) else None
    if isinstance(hard, int) and not isinstance(hard, bool) and calls > hard:
        raise WorkflowError(
            "AGENT_FAILED", f"Tool budget hard limit reached after {hard} tool calls (hard {hard}). The child was "
            f"stopped before calling {name}; raise toolBudget.hard or narrow the task.")


def audited_setup(summary: AttemptSetup, system_prompt: str | None, resources: ResourcePolicy) -> AttemptSetup:
    """The attempt's set-up with what it ran under: the effective system prompt the backend reported
    (with its SHA-256) and the resource policy, when there is one."""
    return replace(
        summary,
        system_prompt=system_prompt,
        system_prompt_sha256=None if system_prompt is None else hashlib.sha256(system_prompt.encode()).hexdigest(),
        disabled_resources=None if resources.empty else resources,
    )


_IDENTITY_CHECKS: tuple[tuple[str, str], ...] = (
    ("model", "Conversation model changed"),
    ("policy", "Conversation execution policy changed"),
    ("tools", "Conversation tool definitions changed"),
)
"""What a conversation's turns must share, in the order they are checked, with spec J.6's messages."""
_PER_TURN_OPTIONS = frozenset({"timeoutMs", "retries"})
"""Options a conversation turn may set for itself (spec A.5); the others are fixed for all turns."""


def conversation_identity(
    request: AttemptRequest, worktree_owner: str | None, definitions: Mapping[str, Any]
) -> dict[str, str]:
    """The identity a conversation's head keeps (spec J.6): the model, a fingerprint of the execution
    policy (tools, cwd, role, worktree owner, parent, system-prompt append, fixed options, resource
    policy) and a hash of the tool definitions (`definitions`: those of extension tools; built-ins
    are fixed by piflow's version). The system prompt itself is the backend's to compare: only it
    knows the prompt it sends."""
    options = {key: value for key, value in request.options.items() if key not in _PER_TURN_OPTIONS}
    policy = [list(request.tools), request.cwd, request.role, worktree_owner, request.parent_id,
              request.system_append, options, list(request.resources.skills), list(request.resources.extensions)]
    tools = {name: definitions.get(name) for name in request.tools}
    return {"model": request.model.name, "policy": _digest(policy), "tools": _digest(tools)}


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


class _Control:
    """The AttemptControl one attempt gets: budget gates, accounting, activity."""

    def __init__(self, runner: AgentRunner, spec: AgentSpec) -> None:
        self._runner = runner
        self._spec = spec
        self.usage = Usage()
        self.soft_sent = False
        self.transcript_path: str | None = None
        self.session_id: str | None = None
        self.conversation_head: dict[str, Any] | None = None
        """What the backend saved after this turn (`save_conversation_state`)."""
        self.previous_state: dict[str, Any] | None = None
        """What the backend saved after the previous turn, once `continue_conversation` checked it."""
        self.tool_calls = 0
        self.effective_system_prompt: str | None = None

    def before_turn(self) -> None:
        self._runner.run.budget.check_turn()

    def after_turn(self, usage: Usage, final: bool) -> str | None:
        self.usage = Usage(
            self.usage.input + usage.input,
            self.usage.output + usage.output,
            self.usage.cache_read + usage.cache_read,
            self.usage.cache_write + usage.cache_write,
            self.usage.cost_usd + usage.cost_usd,
        )
        run = self._runner.run
        run.budget.add_usage(usage.tokens, usage.cost_usd)
        self._runner.account(usage)
        if final:
            return None
        run.budget.check_turn()
        if run.budget.soft_crossed and not self.soft_sent:
            self.soft_sent = True
            return soft_instruction(run.budget.snapshot_usage())
        return None

    def activity(self, text: str | None) -> None:
        self._runner.set_activity(text)

    def tool_call(self, name: str) -> None:
        self.tool_calls += 1
        check_tool_budget(self._spec.options, self.tool_calls, name)

    def validate_result(self, value: Any) -> bool:
        return self._spec.output_schema is None or schema_accepts(self._spec.output_schema, value)

    def transcript(self, path: str, session_id: str | None = None) -> None:
        self.transcript_path = path
        self.session_id = session_id

    def continue_conversation(self, identity: dict[str, str]) -> None:
        """Check that this turn continues the conversation's persisted head (spec G.3, J.6): the
        next turn, with the same model and execution policy; else RESUME_INCOMPATIBLE, never a
        silent fresh start. A pi-subagents child only reopens its session: its resumes follow that
        dialect's rules, not J.6."""
        runner = self._runner
        assert runner.conversation is not None
        head = runner.run.store.conversation_head(runner.run.id, runner.conversation)
        turns = runner.kind is OperationKind.TURN
        if turns and head is None and runner.turn > 1:
            message = (f"Conversation {conversation_name(runner.conversation)}: the state of turn "
                       f"{runner.turn - 1} is missing from the run store, so turn {runner.turn} cannot continue it")
            runner.run.emit(events.RUN_WARNING, {"message": message})
        if turns and (head[0] + 1 if head is not None else 1) != runner.turn:
            raise WorkflowError("RESUME_INCOMPATIBLE", "Conversation turn does not continue its persisted head")
        if head is None:
            return
        saved, state = head[1].get("identity"), head[1].get("state")
        if not isinstance(saved, dict) or not (state is None or isinstance(state, dict)):
            message = "Cannot reopen conversation transcript: its saved state is damaged"
            raise WorkflowError("RESUME_INCOMPATIBLE", message)
        for key, message in _IDENTITY_CHECKS if turns else ():
            if saved.get(key) != identity[key]:
                raise WorkflowError("RESUME_INCOMPATIBLE", message)
        self.previous_state = state

    def conversation_state(self) -> dict[str, Any] | None:
        return self.previous_state

    def save_conversation_state(self, state: dict[str, Any]) -> None:
        self.conversation_head = state

    def system_prompt(self, text: str) -> None:
        self.effective_system_prompt = text


class AgentRunner:
    """One agent node of a run, from `queued` to a settled state."""

    def __init__(
        self,
        run: ActiveRun,
        spec: AgentSpec,
        task: str,
        kind: OperationKind,
        journal_path: str,
        structural_path: list[str],
        worktree_owner: str | None,
        conversation: str | None = None,
        turn: int = 0,
        parent_breadcrumb: str | None = None,
        parent: AgentRunner | None = None,
    ) -> None:
        self.turn = turn
        self.depth: int = 0 if parent is None else parent.depth + 1
        """How many ancestors this agent has (a script's agent has none)."""
        self._holds_permit = False
        self._waiting_for_children = 0
        self.run = run
        self.spec = spec
        self.task = task
        self.kind = kind
        self.journal_path = journal_path
        self._commits: list[GroupCommit] = []
        self.conversation = conversation
        n = run.next_agent_number()
        now = time.time()
        parent_id: str | None = None if parent is None else parent.record.id
        self.record: AgentRecord = AgentRecord(
            id=f"{run.id}:{n}",
            run_id=run.id,
            n=n,
            name=spec.display_name,
            label=spec.label,
            role=spec.role,
            requested_model=spec.requested_model,
            model=spec.model_text,
            tools=list(spec.tools),
            state=AgentState.QUEUED,
            structural_path=list(structural_path),
            journal_path=journal_path,
            parent_id=parent_id,
            parent_breadcrumb=parent_breadcrumb,
            worktree_owner=worktree_owner,
            attempts=0,
            tokens_input=0,
            tokens_output=0,
            cache_read=0,
            cache_write=0,
            cost_usd=0.0,
            activity=None,
            error=None,
            created_at=now,
            updated_at=now,
        )
        record = self.record

        def create() -> None:
            run.store.put_agent(record)
            self._emit_state(None, record)

        self._stage(create)
        run.agents[self.record.id] = self

    # -- record keeping ----------------------------------------------------------------------
    def _stage(self, write: Callable[[], None]) -> None:
        commit = self.run.stage(write)
        if not self._commits or self._commits[-1] is not commit:
            self._commits.append(commit)

    async def _commit(self) -> None:
        """Wait until this agent's staged writes are committed; raise the first commit's failure."""
        commits, self._commits = self._commits, []
        failure: WorkflowError | None = None
        for commit in commits:
            try:
                await commit.wait()
            except WorkflowError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure

    def _emit_state(self, previous: str | None, rec: AgentRecord) -> None:
        self.run.emit(events.AGENT_STATE_CHANGED, events.agent_state_payload(rec, previous))

    def _update(self, **fields: Any) -> None:
        """Stage a change of this agent's record (and its state event when state or attempts change)."""
        previous = self.record.state
        record = self.record = replace(self.record, updated_at=time.time(), **fields)
        run = self.run

        def write() -> None:
            run.store.update_agent(record.id, updated_at=record.updated_at, **fields)
            if "state" in fields or "attempts" in fields:
                self._emit_state(previous, record)

        self._stage(write)

    def account(self, usage: Usage) -> None:
        rec = self.record
        self.record = replace(
            rec,
            tokens_input=rec.tokens_input + usage.input,
            tokens_output=rec.tokens_output + usage.output,
            cache_read=rec.cache_read + usage.cache_read,
            cache_write=rec.cache_write + usage.cache_write,
            cost_usd=rec.cost_usd + usage.cost_usd,
        )
        self.run.progress_changed()

    def set_activity(self, text: str | None) -> None:
        if text != self.record.activity:  # stored, so followers (CLI, editor) show what the agent does
            self._update(activity=text)
        self.run.progress_changed()

    def _accounting_fields(self) -> dict[str, Any]:
        rec = self.record
        return {
            "tokens_input": rec.tokens_input,
            "tokens_output": rec.tokens_output,
            "cache_read": rec.cache_read,
            "cache_write": rec.cache_write,
            "cost_usd": rec.cost_usd,
        }

    # -- execution ---------------------------------------------------------------------------
    async def execute(self) -> Any:
        """Run to a value, or raise the error the script sees (with failedAt for outcomes)."""
        run = self.run
        try:
            await run.scheduler.acquire(run.id)
        except BaseException:
            with anyio.CancelScope(shield=True):
                self._settle_cancelled()
            raise
        self._holds_permit = True
        try:
            return await self._attempts()
        finally:
            if self._holds_permit:
                self._holds_permit = False
                run.scheduler.release(run.id)

    async def wait_for_child(self, done: anyio.Event) -> None:
        """Wait in `waiting_for_child` without a permit, so a child can run in it (spec J.1).

        Concurrent waits (parallel tool calls) share one release; the last to end re-queues.
        """
        run = self.run
        if self._waiting_for_children == 0:
            self._update(state=AgentState.WAITING_FOR_CHILD)
            self._holds_permit = False
            run.scheduler.release(run.id)
        self._waiting_for_children += 1
        try:
            await done.wait()
        finally:
            self._waiting_for_children -= 1
        if self._waiting_for_children == 0:
            await run.scheduler.acquire(run.id)
            self._holds_permit = True
            self._update(state=AgentState.RUNNING)

    def _settle_cancelled(self) -> None:
        if self.record.state not in AGENT_SETTLED:
            self._update(
                state=AgentState.CANCELLED,
                activity=None,
                error={"code": "CANCELLED", "message": "Agent cancelled"},
                **self._accounting_fields(),
            )
            self.run.flush()

    async def _fail(self, error: WorkflowError) -> WorkflowError:
        self._update(
            state=AgentState.FAILED, activity=None, error={"code": error.code, "message": error.message},
            **self._accounting_fields(),
        )
        self._stage(self.run.persist_usage)
        await self._commit()
        failed_at = self.journal_path if error.code in OUTCOME_CODES else None
        return WorkflowError(error.code, error.message, failed_at=failed_at)

    async def _attempts(self) -> Any:
        run, spec = self.run, self.spec
        try:
            run.budget.check_launch()
        except WorkflowError as exc:
            raise await self._fail(exc) from None
        previous_error: str | None = None
        attempt = retried = 0
        try:
            while True:
                attempt += 1
                if attempt > 1:
                    self._update(state=AgentState.RETRYING)
                try:
                    run.budget.start_attempt()
                except WorkflowError as exc:
                    raise await self._fail(exc) from None
                self._update(state=AgentState.RUNNING, attempts=attempt)
                try:
                    return await self._one_attempt(attempt, previous_error)
                except SetupFailed as exc:  # a throwing setup hook is not retried (spec L.5)
                    raise await self._fail(exc) from None
                except ProviderRateLimited as exc:
                    if self._fall_back(str(exc)):
                        continue
                    await run.provider_pause()
                    attempt -= 1
                    continue
                except WorkflowError as exc:
                    # Imported on the first failure: a run whose agents succeed never loads the
                    # pi-subagents agent definitions.
                    from piflow.config.agent_definitions import is_provider_failure

                    if exc.code == "AGENT_FAILED" and is_provider_failure(exc.message) and self._fall_back(exc.message):
                        continue  # a fallback model is not a retry: `retries` still counts task failures only
                    if exc.code in _NOT_RETRIED or retried >= spec.retries:
                        raise await self._fail(exc) from None
                    retried += 1
                    previous_error = exc.message
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                self._settle_cancelled()
            raise

    def _fall_back(self, failure: str) -> bool:
        """Move to the next of `fallbackModels` after a provider failure; False when none is left.

        The next attempt's set-up (its record) and the agent's record name the model that runs.
        """
        spec = self.spec
        if not spec.fallback_models:
            return False
        self.spec = replace(spec, model=spec.fallback_models[0], fallback_models=spec.fallback_models[1:])
        self._update(model=self.spec.model_text)
        label = spec.label or spec.display_name
        self.run.emit(events.RUN_WARNING, {"message": f"{label}: model {spec.model.name} failed with a provider "
                                           f"failure ({failure}); trying fallback model {self.spec.model.name}"})
        return True

    async def _one_attempt(self, attempt: int, previous_error: str | None) -> Any:
        run, spec = self.run, self.spec
        soft = soft_instruction(run.budget.snapshot_usage()) if run.budget.soft_crossed else None
        control = _Control(self, spec)
        control.soft_sent = soft is not None
        label = spec.label or spec.display_name
        owner = self.record.worktree_owner
        setup = SessionSetup(
            task=self.task,
            options=spec.options,
            cwd=await run.agent_cwd(owner),
            model=spec.model,
            thinking=spec.thinking,
            tools=spec.tools,
            session_label=f"{run.workflow_name}:{label}:attempt-{attempt}",
            system_append=spec.system_append,
        )
        hooks = ordered(run.extensions.setup_hooks)
        summary = setup_summary(setup, hooks)
        if hooks:
            facts = run.functions.facts if run.functions is not None else {}
            context = {"run": facts, "identity": {"agentId": self.record.id, "journalPath": self.journal_path},
                       "attempt": attempt, "signal": facts.get("signal")}
            setup, summary = await apply_hooks(
                hooks, setup, context, lambda requested: resolve_model(requested, run.resolution)
            )
        request = AttemptRequest(
            run_id=run.id,
            agent_id=self.record.id,
            attempt=attempt,
            workflow_name=run.workflow_name,
            label=label,
            task=setup.task,
            prompt=attempt_prompt(
                run.workflow_name,
                label,
                setup.task,
                parent_id=self.record.parent_id,
                retry_of=(attempt, previous_error) if previous_error is not None else None,
                soft_instruction=soft,
            ),
            model=setup.model,
            thinking=setup.thinking,
            tools=setup.tools,
            cwd=setup.cwd,
            role=spec.role,
            system_append=setup.system_append,
            output_schema=spec.output_schema,
            options=spec.options,
            conversation=self.conversation,
            turn=self.turn,
            parent_id=self.record.parent_id,
            resources=spec.resources,
        )
        identity: dict[str, str] = {}
        if self.conversation is not None:
            definitions = {name: tool.definition() for name, tool in run.extensions.agent_tools().items()}
            identity = conversation_identity(request, owner, definitions)
        started = time.time()
        error: WorkflowError | None = None
        value: Any = None
        try:
            if self.conversation is not None:
                control.continue_conversation(identity)
            if spec.timeout_ms is not None:
                with anyio.fail_after(spec.timeout_ms / 1000):
                    value = await self._run_backend(request, control)
            else:
                value = await self._run_backend(request, control)
        except TimeoutError:
            error = WorkflowError("AGENT_TIMEOUT", "Agent attempt timed out")
        except WorkflowError as exc:
            error = exc
        except (ProviderRateLimited, anyio.get_cancelled_exc_class()):
            raise
        except Exception as exc:  # a backend bug or transport error fails the attempt, not the engine
            error = WorkflowError("AGENT_FAILED", str(exc) or type(exc).__name__)
        finally:
            if owner is not None:
                with anyio.CancelScope(shield=True):
                    snapshot_failure = await run.worktrees.commit_attempt_async(owner)
                error = error or snapshot_failure  # the agent's own failure is the one reported
            attempt_record = AttemptRecord(
                    agent_id=self.record.id,
                    attempt=attempt,
                    started_at=started,
                    ended_at=time.time(),
                    error=None if error is None else error.to_json(),
                    tokens_input=control.usage.input,
                    tokens_output=control.usage.output,
                    cache_read=control.usage.cache_read,
                    cache_write=control.usage.cache_write,
                    cost_usd=control.usage.cost_usd,
                    transcript_path=control.transcript_path,
                    session_id=control.session_id,
                    setup=audited_setup(summary, control.effective_system_prompt, spec.resources),
            )
            self._stage(lambda: run.store.put_attempt(attempt_record))
        if error is not None:
            raise error
        if spec.output_schema is not None and not schema_accepts(spec.output_schema, value):
            raise WorkflowError("RESULT_INVALID", "Agent did not submit a valid workflow_result after one repair")
        conversation = self.conversation
        if conversation is not None:  # every backend's turns keep a head: a replayed turn needs it (G.3)
            head = {"identity": identity, "state": control.conversation_head}
            self._stage(lambda: run.store.put_conversation_head(run.id, conversation, self.turn, head))
        self._stage(lambda: run.operations.record(self.kind, self.journal_path, value))
        self._update(state=AgentState.COMPLETED, activity=None, **self._accounting_fields())
        self._stage(run.persist_usage)
        await self._commit()
        return value

    async def _run_backend(self, request: AttemptRequest, control: _Control) -> Any:
        """The backend's attempt; with the `agent` tool, inside the scope its children live in."""
        if CHILD_AGENT_TOOL not in request.tools:
            return await self.run.backend.run_attempt(request, control)
        failure: Exception | None = None
        value: Any = None
        async with anyio.create_task_group() as group:
            try:
                value = await self.run.backend.run_attempt(replace(request, children=ChildAgents(self, group)), control)
            except Exception as exc:  # re-raised below as itself, not wrapped in the group's ExceptionGroup
                failure = exc
            finally:
                group.cancel_scope.cancel()  # uncollected children end with their parent (spec J.1)
        if failure is not None:
            raise failure
        return value
