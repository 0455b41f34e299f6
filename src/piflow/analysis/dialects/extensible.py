"""pi-extensible-workflows 1.0.1: the preflight rules of spec B.1, in the reference's order.

Each rule yields findings; `RULES` registers them in the order the reference checks (metadata,
syntax, reserved identifiers, direct-call bans, extra schemas, per-call checks in start order,
model availability, tools, roles). Per-call checks are a second table, `CALL_RULES`, run for each
call in turn, because the reference fails on the first bad *call*, whichever check it breaks.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final

from piflow.analysis.calls import INTERNAL_NAMES, PRIMITIVES
from piflow.analysis.dialects import EXTENSIBLE
from piflow.analysis.expressions import (
    UNKNOWN,
    ArrayExpr,
    Expr,
    LiteralExpr,
    ObjectExpr,
    PropertyExpr,
    SpreadExpr,
    effective_member,
    effective_members,
    literal_string,
    stable_name,
    static_value,
)
from piflow.analysis.facts import CallFact, Placed
from piflow.analysis.findings import Finding, Fix, TextEdit
from piflow.analysis.jsliterals import is_js_integer, js_blank
from piflow.analysis.metadata import metadata_problem
from piflow.analysis.option_keys import check_option_keys
from piflow.analysis.role_policy import role_model_credentials, role_policy_problem
from piflow.analysis.rules import UNSET, Dialect, RuleContext, RuleSpec, StatementMemo
from piflow.analysis.schemas import schema_problem
from piflow.analysis.syntax import to_expr
from piflow.analysis.syntax_check import syntax_problems
from piflow.analysis.walker import WalkConfig
from piflow.config.model_refs import THINKING_LEVELS, ModelRef, resolve_model_reference, unknown_alias_error
from piflow.errors import WorkflowError

NAME: Final = EXTENSIBLE
AGENT_OPTION_KEYS: Final = (
    "label",
    "model",
    "thinking",
    "tools",
    "role",
    "outputSchema",
    "retries",
    "timeoutMs",
)
ROLE_CONFLICT_KEYS: Final = ("model", "thinking", "tools")
ROLE_CONFLICT: Final = "Role agents must not specify model, thinking, or tools"

CallRule = Callable[[RuleContext, Placed[CallFact]], Iterable[Finding]]
AGENT_KINDS: Final = frozenset({"agent", "conversation"})


# -- metadata ----------------------------------------------------------------------------------------


def check_metadata(ctx: RuleContext) -> Iterator[Finding]:
    """Step 1: the tool call's metadata (preflight only: an editor has none)."""
    if ctx.metadata is UNSET:
        return
    problem = metadata_problem(ctx.metadata)
    if problem is not None:
        yield ctx.finding("INVALID_METADATA", problem, 0, 0)


def check_meta_header(ctx: RuleContext) -> Iterator[Finding]:
    """Editor lint: pi ignores the `export const meta` header, but a header that would be invalid
    metadata is almost certainly a mistake (piflow's runner may use it as the run's metadata)."""
    header = ctx.document.header
    if header is None or header.value is None:
        return
    value = static_value(to_expr(ctx.document.data, header.value, 0))
    if value is UNKNOWN:
        return
    problem = metadata_problem(value)
    if problem is not None:
        yield ctx.finding(
            "INVALID_METADATA", problem, header.value.start_byte, header.value.end_byte, severity="warning"
        )


# -- syntax and identifiers ----------------------------------------------------------------------------


def check_syntax(ctx: RuleContext) -> Iterator[Finding]:
    """Step 2 (spec A.1)."""
    document = ctx.document
    if js_blank(document.text):
        yield ctx.finding("INVALID_SYNTAX", "Workflow script must be non-empty", 0, len(document.data))
        return
    for problem in syntax_problems(document, ctx.facts, compile=ctx.compile, module=True):
        if problem.source == "engine":
            if not ctx.preflight:
                yield ctx.finding("INVALID_SYNTAX", problem.message, problem.start, problem.end, severity="warning")
            continue
        yield ctx.finding("INVALID_SYNTAX", f"Invalid workflow syntax: {problem.message}", problem.start, problem.end)


def check_reserved_identifiers(ctx: RuleContext) -> Iterator[Finding]:
    """Step 3: the instrumentation names, agent's first, then conversation's, then withWorktree's."""
    uses = ctx.facts.names("reserved")
    for purpose, name in INTERNAL_NAMES.items():
        for use in uses:
            if use.fact.name == name:
                yield ctx.finding(
                    "INVALID_METADATA",
                    f"{name} is reserved for workflow {purpose} instrumentation",
                    use.at(use.fact.start),
                    use.at(use.fact.end),
                )


def check_direct_calls(ctx: RuleContext) -> Iterator[Finding]:
    """Step 4: `withWorktree` then `conversation` only as direct callees or plain object keys."""
    uses = ctx.facts.names("indirect")
    for name in ("withWorktree", "conversation"):
        for use in uses:
            if use.fact.name == name:
                yield ctx.finding(
                    "INVALID_METADATA",
                    f"{name} calls must use a direct {name}(...) call; aliases and indirect calls are unsupported",
                    use.at(use.fact.start),
                    use.at(use.fact.end),
                )


def check_extra_schemas(ctx: RuleContext) -> Iterator[Finding]:
    """Step 5: the caller's schemas (preflight only)."""
    for index, schema in enumerate(ctx.schemas):
        problem = schema_problem(schema, f"schema[{index}]")
        if problem is not None:
            yield ctx.finding("INVALID_SCHEMA", problem, 0, 0)


# -- per-call checks (step 6) ----------------------------------------------------------------------------


def check_calls(ctx: RuleContext) -> Iterator[Finding]:
    """Step 6: each call in start order through the per-call rules (their findings carry their ids).

    A call they found nothing wrong with is not checked again while its statement is unchanged."""
    for statement, calls in ctx.memo.unchecked(ctx.facts, "call-checks"):
        clean = True
        for call in calls:
            for rule_id, rule in _CALL_RULES_BY_KIND[call.fact.kind]:
                ctx.rule = rule_id
                for finding in rule(ctx, call):
                    clean = False
                    yield finding
        if clean:
            statement.clean.add("call-checks")


def _call_range(call: Placed[CallFact]) -> tuple[int, int]:
    return call.at(call.fact.start), call.at(call.fact.end)


def _node_range(call: Placed[CallFact], node: Expr | PropertyExpr | None) -> tuple[int, int]:
    if node is None:
        return _call_range(call)
    return call.at(node.start), call.at(node.end)


def check_conversation_name(ctx: RuleContext, call: Placed[CallFact]) -> Iterator[Finding]:
    fact = call.fact
    if fact.kind != "conversation":
        return
    name = literal_string(fact.arg(0))
    if name is None or js_blank(name) or len(fact.args) > 2:
        node = fact.args[2] if len(fact.args) > 2 else fact.arg(0)
        yield ctx.finding(
            "INVALID_METADATA",
            "conversation requires a stable name and optional options object",
            *_node_range(call, node),
        )


def check_agent_options(ctx: RuleContext, call: Placed[CallFact]) -> Iterator[Finding]:
    fact = call.fact
    if fact.kind not in ("agent", "conversation"):
        return
    options = fact.arg(1)
    if not isinstance(options, ObjectExpr):
        return
    yield from _role_conflict(ctx, call, options)
    members = effective_members(options, AGENT_OPTION_KEYS)
    for key in AGENT_OPTION_KEYS:
        member = members.get(key)
        node = member.value if member is not None else None
        if node is None:
            continue
        value = static_value(node)
        if value is UNKNOWN:
            continue
        yield from _option_findings(ctx, call, key, node, value)


def _role_conflict(ctx: RuleContext, call: Placed[CallFact], options: ObjectExpr) -> Iterator[Finding]:
    conflicting = [
        prop for prop in options.properties if isinstance(prop, PropertyExpr) and prop.key in ROLE_CONFLICT_KEYS
    ]
    if not conflicting or not any(isinstance(prop, PropertyExpr) and prop.key == "role" for prop in options.properties):
        return
    value = static_value(options)  # (the costly test last: most options have no conflicting key)
    if not isinstance(value, dict) or not isinstance(value.get("role"), str):
        return
    role = effective_member(options, "role")
    related = [(call.at(role.start), call.at(role.end), "the role that sets model, thinking and tools")] if role else []
    removal = Fix(
        "Remove model, thinking and tools (the role decides them)",
        tuple(TextEdit(ctx.range(start, end), "") for start, end in _removal_spans(call, options, conflicting)),
    )
    yield ctx.finding(
        "INVALID_METADATA",
        ROLE_CONFLICT,
        *_node_range(call, conflicting[0]),
        related=related,
        fixes=[removal],
    )


def _removal_spans(call: Placed[CallFact], options: ObjectExpr, removed: list[PropertyExpr]) -> list[tuple[int, int]]:
    """Byte spans deleting members with their separating commas."""
    members = list(options.properties)
    gone = {id(prop) for prop in removed}
    spans: list[tuple[int, int]] = []
    index = 0
    while index < len(members):
        if id(members[index]) not in gone:
            index += 1
            continue
        first = index
        while index < len(members) and id(members[index]) in gone:
            index += 1
        if index < len(members):
            spans.append((call.at(members[first].start), call.at(members[index].start)))
        elif first > 0:
            spans.append((call.at(members[first - 1].end), call.at(members[index - 1].end)))
        else:
            spans.append((call.at(members[first].start), call.at(members[index - 1].end)))
    return spans


def _option_findings(ctx: RuleContext, call: Placed[CallFact], key: str, node: Expr, value: Any) -> Iterator[Finding]:
    """Step 6's check of one option value (its span is computed only for a finding: most have none)."""
    if key == "label" and (not isinstance(value, str) or js_blank(value)):
        yield ctx.finding("INVALID_METADATA", "agent label must be a non-empty string", *_node_range(call, node))
    elif key == "model":
        if not isinstance(value, str) or js_blank(value):
            yield ctx.finding("INVALID_METADATA", "agent model must be a non-empty string", *_node_range(call, node))
        else:
            yield from _model_resolution(ctx, call, node, value)
    elif key == "thinking" and (not isinstance(value, str) or value not in THINKING_LEVELS):
        fixes = ctx.did_you_mean(node, call.base, value, THINKING_LEVELS) if isinstance(value, str) else []
        message = "agent thinking must be off, minimal, low, medium, high, xhigh, or max"
        if not ctx.preflight:  # the reference's message is fixed; the editor also names the value
            message += f" (got {_shown(value)})"
        yield ctx.finding("INVALID_METADATA", message, *_node_range(call, node), fixes=fixes)
    elif key == "tools" and (not isinstance(value, list) or not all(isinstance(tool, str) for tool in value)):
        yield ctx.finding("INVALID_METADATA", "agent tools must be an array of strings", *_node_range(call, node))
    elif key == "role" and (not isinstance(value, str) or js_blank(value)):
        yield ctx.finding("INVALID_METADATA", "agent role must be a non-empty string", *_node_range(call, node))
    elif key == "outputSchema":
        problem = schema_problem(value, "agent outputSchema")
        if problem is not None:
            yield ctx.finding("INVALID_SCHEMA", problem, *_node_range(call, node))
    elif key == "retries" and not (is_js_integer(value) and value >= 0):
        yield ctx.finding("INVALID_METADATA", "agent retries must be a non-negative integer", *_node_range(call, node))
    elif key == "timeoutMs" and not (value is None or (is_js_integer(value) and value >= 1)):
        yield ctx.finding(
            "INVALID_METADATA", "agent timeoutMs must be null or a positive integer", *_node_range(call, node)
        )


def _shown(value: Any, limit: int = 40) -> str:
    """A short JSON rendering of a bad option value for a message."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _resolve(ctx: RuleContext, value: str) -> ModelRef | WorkflowError:
    """The resolution of a model reference, or why it fails (computed once per value and context)."""
    cache: dict[str, ModelRef | WorkflowError] = ctx.shared.setdefault("model resolutions", {})
    result = cache.get(value)
    if result is None:
        caps = ctx.capabilities
        try:
            result = resolve_model_reference(value, caps.model_aliases, caps.resolvable_models, caps.settings_path)
        except WorkflowError as error:
            result = error
        cache[value] = result
    return result


def resolved_model(ctx: RuleContext, value: str) -> ModelRef:
    """The model a reference resolves to (raising why it does not), resolved once per context."""
    resolution = _resolve(ctx, value)
    if isinstance(resolution, WorkflowError):
        raise resolution
    return resolution


def _model_candidates(ctx: RuleContext, value: str) -> set[str]:
    """What a `model:` may be changed to: names that resolve to an available model, never `value` itself."""
    caps = ctx.capabilities
    names = set(caps.models) | set(caps.model_aliases)
    names.update(model.partition("/")[2] for model in caps.resolvable_models)
    usable = set()
    for name in names - {value}:
        resolution = _resolve(ctx, name)
        if isinstance(resolution, ModelRef) and (resolution.name in caps.models or not caps.verified_models):
            usable.add(name)
    return usable


def _model_resolution(ctx: RuleContext, call: Placed[CallFact], node: Expr, value: str) -> Iterator[Finding]:
    error = _resolve(ctx, value)
    if isinstance(error, WorkflowError):
        caps = ctx.capabilities
        message = error.message
        if not ctx.preflight and not caps.verified_models and "/" not in value and value not in caps.model_aliases:
            message += ": not a model alias, and no model registry (models.json) to resolve a bare id"
        span = _node_range(call, node)
        fixes = ctx.did_you_mean(node, call.base, value, _model_candidates(ctx, value))
        yield ctx.finding(error.code, message, *span, fixes=fixes)


def check_with_worktree(ctx: RuleContext, call: Placed[CallFact]) -> Iterator[Finding]:
    fact = call.fact
    if fact.kind != "withWorktree" or fact.has_spread:
        return
    args = fact.args
    if not 1 <= len(args) <= 2:
        node = args[2] if len(args) > 2 else None
        yield ctx.finding(
            "INVALID_METADATA",
            "withWorktree requires a callback or a name and callback",
            *_node_range(call, node),
        )
        return
    if static_value(args[-1]) is not UNKNOWN:
        yield ctx.finding("INVALID_METADATA", "withWorktree callback must be a function", *_node_range(call, args[-1]))
    if len(args) == 2:
        name = static_value(args[0])
        if name is not UNKNOWN and (not isinstance(name, str) or js_blank(name)):
            yield ctx.finding(
                "INVALID_METADATA",
                "withWorktree name must be a non-empty string",
                *_node_range(call, args[0]),
            )


def check_checkpoint_name(ctx: RuleContext, call: Placed[CallFact]) -> Iterator[Finding]:
    fact = call.fact
    if fact.kind == "checkpoint" and stable_name(fact.arg(0)) is False:
        yield ctx.finding(
            "INVALID_METADATA", "checkpoint requires a stable explicit name", *_node_range(call, fact.arg(0))
        )


def check_parallel_shape(ctx: RuleContext, call: Placed[CallFact]) -> Iterator[Finding]:
    fact = call.fact
    if fact.kind != "parallel" or fact.has_spread:
        return
    name = literal_string(fact.arg(0))
    if len(fact.args) != 2 or name is None or js_blank(name) or not isinstance(fact.arg(1), ObjectExpr):
        yield ctx.finding(
            "INVALID_METADATA",
            "parallel requires an operation name string and tasks record",
            *_call_range(call),
        )


def check_pipeline_shape(ctx: RuleContext, call: Placed[CallFact]) -> Iterator[Finding]:
    fact = call.fact
    if fact.kind != "pipeline" or fact.has_spread:
        return
    name = literal_string(fact.arg(0))
    if (
        len(fact.args) != 3
        or name is None
        or js_blank(name)
        or not isinstance(fact.arg(1), ObjectExpr)
        or not isinstance(fact.arg(2), ObjectExpr)
    ):
        yield ctx.finding(
            "INVALID_METADATA",
            "pipeline requires an operation name string, items record, and stages record",
            *_call_range(call),
        )


CALL_RULES: Final[tuple[tuple[str, tuple[str, ...], CallRule], ...]] = (
    ("conversation-name", ("conversation",), check_conversation_name),
    ("agent-options", ("agent", "conversation"), check_agent_options),
    ("with-worktree-arguments", ("withWorktree",), check_with_worktree),
    ("checkpoint-name", ("checkpoint",), check_checkpoint_name),
    ("parallel-shape", ("parallel",), check_parallel_shape),
    ("pipeline-shape", ("pipeline",), check_pipeline_shape),
)
"""The per-call rules in order (all of the reference): stable id, the kinds of calls, the check."""
_CALL_RULES_BY_KIND: Final = {
    kind: tuple((rule_id, rule) for rule_id, kinds, rule in CALL_RULES if kind in kinds) for kind in PRIMITIVES
}


# -- references (steps 9-12) -----------------------------------------------------------------------------


Members = dict[str, PropertyExpr]
"""An agent call's effective option members: the `effective_member` of each of `AGENT_OPTION_KEYS`."""


AgentStatement = tuple[StatementMemo, list[tuple[Placed[CallFact], Members]]]
"""A statement's memo and its agent calls, each with its option members."""

AgentStatements = list[AgentStatement]


def agent_statements(ctx: RuleContext) -> AgentStatements:
    """The statements with `agent` or `conversation` calls, each with those calls and their option
    members, listed once per analysis (the members once per statement: kept in its memo)."""
    found: AgentStatements | None = ctx.shared.get("agent statements")
    if found is None:
        found = []
        for statement, calls in ctx.memo.statements(ctx.facts):
            agents = [call for call in calls if call.fact.kind in AGENT_KINDS]
            if not agents:
                continue
            members: list[Members] | None = statement.derived.get("agent options")
            if members is None:
                members = [effective_members(call.fact.arg(1), AGENT_OPTION_KEYS) for call in agents]
                statement.derived["agent options"] = members
            found.append((statement, list(zip(agents, members, strict=True))))
        ctx.shared["agent statements"] = found
    return found


def unchecked_agents(ctx: RuleContext, rule: str) -> Iterator[AgentStatement]:
    """The statements with agent calls, except those `rule` found clean while unchanged; the rule marks
    a statement clean (`statement.clean.add(rule)`) when it found nothing wrong with its calls."""
    return ((statement, agents) for statement, agents in agent_statements(ctx) if rule not in statement.clean)


def option(members: Members, key: str) -> Expr | None:
    member = members.get(key)
    return None if member is None else member.value


def agent_calls(ctx: RuleContext) -> Iterator[tuple[Placed[CallFact], Members]]:
    """Every `agent` and `conversation` call in start order, with its option members."""
    for _, agents in agent_statements(ctx):
        yield from agents


def check_model_availability(ctx: RuleContext) -> Iterator[Finding]:
    """Step 10: every statically named model must be available (unless the caller skips this).

    The editor says why a known model is unavailable (its key variable is unset) and warns when a
    model runs here only because the backend needs no key.
    """
    caps = ctx.capabilities
    if caps.skip_model_availability:
        return
    for statement, agents in unchecked_agents(ctx, "model-availability"):
        clean = True
        for call, members in agents:
            node = option(members, "model")
            requested = literal_string(node)
            if node is None or requested is None:
                continue
            resolution = _resolve(ctx, requested)
            if isinstance(resolution, WorkflowError):
                continue
            resolved = resolution.name
            variable = None if ctx.preflight else caps.missing_credentials.get(resolved)
            if resolved in caps.models:
                if variable is not None:
                    clean = False
                    message = _credentials_message(resolved, variable, blocking=False)
                    yield ctx.finding("MISSING_CREDENTIALS", message, *_node_range(call, node), severity="warning")
                continue
            clean = False
            span = _node_range(call, node)
            fixes = ctx.did_you_mean(node, call.base, requested, _model_candidates(ctx, requested))
            if not ctx.preflight and not caps.verified_models:
                yield ctx.finding(
                    "UNKNOWN_MODEL",
                    f"Cannot verify model {resolved}: no model registry is configured",
                    *span,
                    severity="information",
                    fixes=fixes,
                )
            else:
                if variable is not None:
                    message = _credentials_message(resolved, variable, blocking=True)
                elif requested in caps.model_aliases:
                    message = unknown_alias_error(requested, resolved, caps.settings_path).message
                else:
                    message = f"Unknown model: {resolved}"
                yield ctx.finding("UNKNOWN_MODEL", message, *span, fixes=fixes)
            if ctx.preflight:
                return
        if clean:
            statement.clean.add("model-availability")


def _credentials_message(model: str, variable: str, *, blocking: bool) -> str:
    if blocking:
        return f"Model {model} is configured, but {variable} is not set in this environment, and this backend needs it"
    return f"{variable} is not set in this environment: {model} runs only on backends that need no key (scripted, pi)"


def tool_literals(tools: Expr | None) -> Iterator[LiteralExpr]:
    if isinstance(tools, ArrayExpr):
        for element in tools.elements:
            if isinstance(element, LiteralExpr) and element.kind == "string":
                yield element


def check_tools(ctx: RuleContext) -> Iterator[Finding]:
    """Step 11. Quirk kept for preflight: when the first missing tool is `""`, nothing is reported."""
    available = ctx.capabilities.tools
    for statement, agents in unchecked_agents(ctx, "tools"):
        clean = True
        for call, members in agents:
            for element in tool_literals(option(members, "tools")):
                tool = element.value
                if tool in available:
                    continue
                clean = False
                if ctx.preflight:
                    if tool:
                        yield ctx.finding("UNKNOWN_TOOL", f"Unknown tool: {tool}", *_node_range(call, element))
                    return
                if tool:
                    yield ctx.finding(
                        "UNKNOWN_TOOL",
                        f"Unknown tool: {tool}",
                        *_node_range(call, element),
                        fixes=ctx.did_you_mean(element, call.base, tool, available),
                    )
        if clean:
            statement.clean.add("tools")


def check_roles(ctx: RuleContext) -> Iterator[Finding]:
    """Step 12."""
    available = ctx.capabilities.agent_types
    for statement, agents in unchecked_agents(ctx, "roles"):
        clean = True
        for call, members in agents:
            node = option(members, "role")
            role = literal_string(node)
            if node is None or role is None or role in available or js_blank(role):
                continue  # a blank role is already an invalid option (step 6)
            clean = False
            yield ctx.finding(
                "UNKNOWN_AGENT_TYPE",
                f"Unknown agent type: {role}",
                *_node_range(call, node),
                fixes=ctx.did_you_mean(node, call.base, role, available),
            )
            if ctx.preflight:
                return
        if clean:
            statement.clean.add("roles")


def check_role_policy(ctx: RuleContext) -> Iterator[Finding]:
    """Editor lint for launch step 9: the roles a launch will check, reported at the `role:` using them.

    A literal role brings in its own definition; a dynamic role makes the launch check every role.
    Statements none of whose calls brings a role in are skipped while unchanged.
    """
    caps = ctx.capabilities
    if not caps.roles:
        return
    reported: set[str] = set()
    verdicts: dict[str, tuple[WorkflowError | None, tuple[str, str] | None]] = {}
    for statement, agents in unchecked_agents(ctx, "role-policy"):
        clean = True
        for call, members in agents:
            node = option(members, "role")
            role = literal_string(node)
            if role is not None and role in caps.roles:
                names = [role]
            elif role is None and dynamic_agent_role(call.fact.arg(1)):
                names = [name for name in caps.roles if name not in reported]
            else:
                continue
            clean = False  # (a role brought in: later dynamic roles depend on it)
            for name in names:
                verdict = verdicts.get(name)
                if verdict is None:  # (once per role: it depends on the role and the capabilities only)
                    definition = caps.roles[name]
                    problem = role_policy_problem(name, definition, caps)
                    verdict = verdicts[name] = (problem, None if problem else role_model_credentials(definition, caps))
                problem, credentials = verdict
                if problem is not None:
                    via = "" if name == role else " (a dynamic role makes the launch check every role)"
                    yield ctx.finding(problem.code, problem.message + via, *_node_range(call, node))
                elif credentials is not None:
                    message = _credentials_message(*credentials, blocking=False)
                    yield ctx.finding("MISSING_CREDENTIALS", message, *_node_range(call, node), severity="warning")
                reported.add(name)
        if clean:
            statement.clean.add("role-policy")


def dynamic_agent_role(options: Expr | None) -> bool:
    """Whether an agent call's role cannot be known statically (spec B.1 step 8)."""
    if options is None:
        return False
    if not isinstance(options, ObjectExpr):
        return True
    for prop in reversed(options.properties):
        if isinstance(prop, SpreadExpr) or prop.computed:
            return True
        if prop.key == "role":
            return literal_string(prop.value) is None
    return False


RULES: Final = (
    RuleSpec("metadata", check_metadata, reference=True),
    RuleSpec("meta-header", check_meta_header, reference=False),
    RuleSpec("syntax", check_syntax, reference=True),
    RuleSpec("reserved-identifiers", check_reserved_identifiers, reference=True),
    RuleSpec("direct-calls", check_direct_calls, reference=True),
    RuleSpec("extra-schemas", check_extra_schemas, reference=True),
    RuleSpec("call-checks", check_calls, reference=True),
    RuleSpec("model-availability", check_model_availability, reference=True),
    RuleSpec("tools", check_tools, reference=True),
    RuleSpec("roles", check_roles, reference=True),
    RuleSpec("role-policy", check_role_policy, reference=False),
    RuleSpec("option-keys", check_option_keys, reference=False),
)

DIALECT: Final = Dialect(NAME, WalkConfig(strict=True, module=True), RULES, "INVALID_SYNTAX")
