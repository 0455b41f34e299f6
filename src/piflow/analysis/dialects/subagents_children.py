"""pi-subagents literal checks the reference's `validate` leaves to the runtime (SUBAGENTS_SPEC E.2)
and the workspace checks against the agent catalog and the model registry (E.3).

They are editor rules: a launch never runs them, because the runtime rejects these only when the
script reaches the call. Dynamic values are never guessed: a rule speaks only about literals.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from tree_sitter import Node

from piflow.analysis.dialects.subagents_facts import KEY_GRAMMAR, MemberCall
from piflow.analysis.expressions import (
    UNKNOWN,
    ArrayExpr,
    Expr,
    IdentifierExpr,
    LiteralExpr,
    ObjectExpr,
    PropertyExpr,
    SpreadExpr,
    UnaryExpr,
    effective_property,
    literal_string,
    static_value,
)
from piflow.analysis.facts import Placed
from piflow.analysis.findings import Finding
from piflow.analysis.jsliterals import is_js_integer
from piflow.analysis.rules import RuleContext
from piflow.config.agent_definitions import resolve_child_model, resolve_subagent_model
from piflow.config.availability import ModelAvailability
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.analysis.capabilities import Capabilities

MAX_LANES: Final = 32
MAX_STAGES_PER_LANE: Final = 16
MAX_STAGES: Final = 64
MAX_LANES_JSON: Final = 64 * 1024
RESUME_FIELDS: Final = frozenset({"workflowRunId", "key", "latest"})
TIMEOUT_FIELDS: Final = ("timeoutMs", "maxRuntimeMs", "toolTimeoutMs")
_BRANCHING: Final = frozenset(
    {"if_statement", "ternary_expression", "switch_statement", "try_statement", "binary_expression", "for_statement",
     "for_in_statement", "while_statement", "do_statement"}
)  # fmt: skip
"""Constructs whose parts may not all run: two launches under one of these may be exclusive."""


def _span(call: Placed[Any], node: Expr | PropertyExpr) -> tuple[int, int]:
    return call.at(node.start), call.at(node.end)


def _members(params: ObjectExpr) -> dict[str, PropertyExpr]:
    return {prop.key: prop for prop in params.properties if isinstance(prop, PropertyExpr) and prop.key is not None}


def _complete(params: ObjectExpr) -> bool:
    """No spread or computed member: a missing key is certainly missing."""
    return not any(isinstance(prop, SpreadExpr) or prop.computed for prop in params.properties)


def _all_items(call: Placed[MemberCall]) -> Iterator[tuple[int, ObjectExpr]]:
    items = call.fact.arg(0)
    if isinstance(items, ArrayExpr):
        for index, item in enumerate(items.elements):
            if isinstance(item, ObjectExpr):
                yield index, item


def lane_stages(lanes: Expr | None) -> Iterator[tuple[int, int, ObjectExpr]]:
    """`(lane index, stage index, stage)` of a literal `runs.lanes` argument."""
    if not isinstance(lanes, ArrayExpr):
        return
    for lane_index, lane in enumerate(lanes.elements):
        stages = effective_property(lane, "stages")
        if isinstance(stages, ArrayExpr):
            for stage_index, stage in enumerate(stages.elements):
                if isinstance(stage, ObjectExpr):
                    yield lane_index, stage_index, stage


# -- child params (runs.run, runs.all items, lane stages) -------------------------------------------


def _positive(value: Any) -> bool:
    return is_js_integer(value) and value > 0


def child_findings(ctx: RuleContext, call: Placed[MemberCall], params: ObjectExpr, label: str) -> Iterator[Finding]:
    """Keyed resume, `toolBudget` and timeouts of one child's literal params."""
    members = _members(params)

    def problem(message: str, node: Expr | PropertyExpr) -> Finding:
        return ctx.finding("SUBAGENTS_CHILD", message, *_span(call, node))

    resume = members["resume"].value if "resume" in members else None
    if isinstance(resume, ObjectExpr):
        fields = _members(resume)
        if any(key not in RESUME_FIELDS for key in fields):
            yield problem(f"{label} keyed resume contains unsupported fields.", resume)
        latest = static_value(fields["latest"].value) if "latest" in fields else None
        if ("latest" not in fields and _complete(resume)) or (latest is not UNKNOWN and latest is not None
                                                               and latest is not True):  # fmt: skip
            yield problem(f"{label} keyed resume requires latest: true.", resume)
    budget = members["toolBudget"].value if "toolBudget" in members else None
    if isinstance(budget, ObjectExpr):
        fields = _members(budget)
        if "hard" not in fields and _complete(budget):
            yield problem(f"{label} toolBudget requires hard: the number of tool calls after which the child "
                          "stops ({soft?, hard, block?}).", budget)  # fmt: skip
        for key in ("soft", "hard"):
            value = static_value(fields[key].value) if key in fields else UNKNOWN
            if value is not UNKNOWN and not _positive(value):
                yield problem(f"{label} toolBudget.{key} must be a positive integer.", fields[key])
    for key in TIMEOUT_FIELDS:
        value = static_value(members[key].value) if key in members else UNKNOWN
        if value is not UNKNOWN and not _positive(value):
            yield problem(f"{label} {key} must be a positive integer.", members[key])


# -- keys --------------------------------------------------------------------------------------------


def _canonical(value: Any) -> str | None:
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None


def _launches(ctx: RuleContext) -> Iterator[tuple[str, str, str | None, Placed[MemberCall], Expr]]:
    """`(key, kind, canonical params or None, call, key node)` of every literal-keyed launch."""
    for call in ctx.facts.dialect(MemberCall):
        target = call.fact.target
        key_node = call.fact.arg(0)
        if target in ("runs.run", "runs.host") and (key := literal_string(key_node)) is not None:
            assert key_node is not None
            value = static_value(call.fact.arg(1))
            yield key, target, None if value is UNKNOWN else _canonical(value), call, key_node
        elif target == "runs.all":
            for _, item in _all_items(call):
                node = effective_property(item, "key")
                if (key := literal_string(node)) is not None:
                    assert node is not None
                    value = static_value(item)
                    params = None if value is UNKNOWN else _canonical({k: v for k, v in value.items() if k != "key"})
                    yield key, target, params, call, node


def _branch_path(node: Node | None) -> list[int]:
    ids = []
    while node is not None:
        ids.append(node.id)
        node = node.parent
    return ids[::-1]


def _both_run(ctx: RuleContext, first: int, second: int) -> bool:
    """Whether the code at two offsets runs together: their closest common construct is no branch."""
    root = ctx.document.tree.root_node
    a, b = root.descendant_for_byte_range(first, first), root.descendant_for_byte_range(second, second)
    path_a, path_b = _branch_path(a), _branch_path(b)
    common = 0
    while common < min(len(path_a), len(path_b)) and path_a[common] == path_b[common]:
        common += 1
    node = a
    while node is not None and node.id != path_a[common - 1]:
        node = node.parent
    while node is not None:
        if node.type in _BRANCHING or node.type.startswith(("function", "arrow", "method")):
            return False
        node = node.parent
    return True


def check_duplicate_keys(ctx: RuleContext) -> Iterator[Finding]:
    seen: dict[str, tuple[str, str | None, Placed[MemberCall], Expr]] = {}
    for key, kind, params, call, node in _launches(ctx):
        earlier = seen.get(key)
        if earlier is None:
            seen[key] = (kind, params, call, node)
            continue
        earlier_kind, earlier_params, earlier_call, earlier_node = earlier
        related = [(*_span(earlier_call, earlier_node), f"'{key}' is first used here")]
        if earlier_call is call:
            yield ctx.finding("SUBAGENTS_DUPLICATE_KEY", f"runs.all repeats key '{key}'; keys in one runs.all "
                              "must be unique.", *_span(call, node), related=related)  # fmt: skip
        elif not _both_run(ctx, earlier_call.at(earlier_call.fact.start), call.at(call.fact.start)):
            continue
        elif "runs.host" in (kind, earlier_kind):
            yield ctx.finding("SUBAGENTS_DUPLICATE_KEY", f"Workflow key '{key}' is already in use.",
                              *_span(call, node), related=related)  # fmt: skip
        elif params is not None and earlier_params is not None and params != earlier_params:
            yield ctx.finding("SUBAGENTS_DUPLICATE_KEY",
                              f"Duplicate workflow key '{key}' used with incompatible launch params.",
                              *_span(call, node), related=related)  # fmt: skip


def check_all_shape(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.facts.dialect(MemberCall):
        if call.fact.target != "runs.all":
            continue
        items = call.fact.arg(0)
        if items is not None and (isinstance(items, (LiteralExpr, ObjectExpr)) or items.kind == "template"):
            yield ctx.finding("SUBAGENTS_ALL", "runs.all(items) requires an array.", *_span(call, items))
        elif isinstance(items, ArrayExpr):
            for index, item in enumerate(items.elements):
                if isinstance(item, (LiteralExpr, ArrayExpr)) or (item is not None and item.kind == "template"):
                    yield ctx.finding("SUBAGENTS_ALL", f"runs.all item {index} must be an object.",
                                      *_span(call, item))  # fmt: skip


# -- lanes -----------------------------------------------------------------------------------------


def check_lanes(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.facts.dialect(MemberCall):
        if call.fact.target == "runs.lanes":
            yield from _lanes_findings(ctx, call, call.fact.arg(0))


def _lanes_findings(ctx: RuleContext, call: Placed[MemberCall], lanes: Expr | None) -> Iterator[Finding]:
    def problem(message: str, node: Expr | PropertyExpr) -> Finding:
        return ctx.finding("SUBAGENTS_LANES", message, *_span(call, node))

    if lanes is None or isinstance(lanes, (LiteralExpr, ObjectExpr)):
        if lanes is not None:
            yield problem("runs.lanes(lanes) requires an array.", lanes)
        return
    if not isinstance(lanes, ArrayExpr):
        return
    if not lanes.elements:
        yield problem("runs.lanes(lanes) requires at least one lane.", lanes)
    if len(lanes.elements) > MAX_LANES:
        yield problem(f"runs.lanes supports at most {MAX_LANES} lanes.", lanes)
    generated: set[str] = set()
    total = 0
    for i, lane in enumerate(lanes.elements):
        if not isinstance(lane, ObjectExpr):
            continue
        members = _members(lane)
        extra = [prop for key, prop in members.items() if key not in ("key", "stages")]
        if extra:
            yield problem(f"runs.lanes lane {i} contains unsupported fields.", extra[0])
        lane_key = literal_string(members["key"].value) if "key" in members else None
        if lane_key is not None and KEY_GRAMMAR.match(lane_key) is None:
            yield problem(f"runs.lanes lane {i} has an invalid key.", members["key"])
        stages = members["stages"].value if "stages" in members else None
        if not isinstance(stages, ArrayExpr):
            continue
        total += len(stages.elements)
        if not stages.elements:
            yield problem(f"runs.lanes lane {i} requires at least one stage.", stages)
        if len(stages.elements) > MAX_STAGES_PER_LANE:
            yield problem(f"runs.lanes lane {i} supports at most {MAX_STAGES_PER_LANE} stages.", stages)
        stage_keys: set[str] = set()
        for j, stage in enumerate(stages.elements):
            if isinstance(stage, ObjectExpr):
                yield from _stage_findings(ctx, call, i, j, stage, lane_key, stage_keys, generated)
    if total > MAX_STAGES:
        yield problem(f"runs.lanes supports at most {MAX_STAGES} stages in total.", lanes)
    value = static_value(lanes)
    text = _canonical(value) if value is not UNKNOWN else None
    if text is not None and len(text.encode()) > MAX_LANES_JSON:
        yield problem("runs.lanes input exceeds 64 KiB of JSON.", lanes)


def _stage_findings(
    ctx: RuleContext, call: Placed[MemberCall], i: int, j: int, stage: ObjectExpr, lane_key: str | None,
    stage_keys: set[str], generated: set[str],
) -> Iterator[Finding]:  # fmt: skip
    members = _members(stage)
    label = f"runs.lanes lane {i} stage {j}"

    def problem(message: str, node: Expr | PropertyExpr) -> Finding:
        return ctx.finding("SUBAGENTS_LANES", message, *_span(call, node))

    key = literal_string(members["key"].value) if "key" in members else None
    if key is not None:
        if KEY_GRAMMAR.match(key) is None:
            yield problem(f"{label} has an invalid key.", members["key"])
        if key in stage_keys:
            yield problem(f"runs.lanes lane {i} contains duplicate stage key '{key}'.", members["key"])
        elif lane_key is not None:
            child = f"{lane_key}.{key}"
            if child in generated:
                yield problem(f"runs.lanes generated child key '{child}' is duplicated.", members["key"])
            generated.add(child)
        stage_keys.add(key)
    if "resume" not in members:
        return
    resume = static_value(members["resume"].value)
    if resume is UNKNOWN:
        return
    if j == 0 and resume == "previous":
        yield problem(f"runs.lanes lane {i} stage 0 cannot resume previous without a predecessor stage.",
                      members["resume"])  # fmt: skip
    elif j == 0 and isinstance(resume, str):
        yield problem(f"runs.lanes lane {i} stage 0 cannot resume a retained run id in runs.lanes; use "
                      "runs.run(key, { resume: id }) outside lanes, or start the lane with an agent stage and use "
                      'resume: "previous" later.', members["resume"])  # fmt: skip
    elif resume != "previous":
        yield problem(f"{label} resume must be 'previous'.", members["resume"])


# -- boundary and steer --------------------------------------------------------------------------------


def _non_finite(node: Expr | None) -> Expr | None:
    """The first NaN / ±Infinity in a literal value."""
    if node is None:
        return None
    if isinstance(node, IdentifierExpr) and node.name in ("NaN", "Infinity"):
        return node
    if isinstance(node, LiteralExpr) and isinstance(node.value, float) and node.value in (float("inf"), -float("inf")):
        return node
    if isinstance(node, UnaryExpr) and node.operator in "+-":
        return node if _non_finite(node.operand) is not None else None
    children: list[Expr | None] = []
    if isinstance(node, ArrayExpr):
        children = list(node.elements)
    elif isinstance(node, ObjectExpr):
        children = [prop.value if isinstance(prop, PropertyExpr) else None for prop in node.properties]
    return next((found for child in children if (found := _non_finite(child)) is not None), None)


def check_non_finite(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.facts.dialect(MemberCall):
        if call.fact.target == "emit":
            what, value = "emit", call.fact.arg(0)
        elif call.fact.target == "state.set":
            what, value = "state.set value", call.fact.arg(1)
        else:
            continue
        found = _non_finite(value)
        if found is not None:
            yield ctx.finding("SUBAGENTS_BOUNDARY", f"{what} must contain only finite JSON numbers.",
                              *_span(call, found))  # fmt: skip


def check_steer_launched(ctx: RuleContext) -> Iterator[Finding]:
    launched: set[str] = set()
    for call in ctx.facts.dialect(MemberCall):
        target, first = call.fact.target, call.fact.arg(0)
        if target == "runs.run":
            if (key := literal_string(first)) is None:
                return  # a dynamic key may be any key
            launched.add(key)
        elif target == "runs.all":
            if not isinstance(first, ArrayExpr) or any(not isinstance(item, ObjectExpr) for item in first.elements):
                return
            for _, item in _all_items(call):
                if (key := literal_string(effective_property(item, "key"))) is None:
                    return
                launched.add(key)
        elif target == "runs.lanes":
            if not isinstance(first, ArrayExpr):
                return
            for lane in first.elements:
                lane_key = literal_string(effective_property(lane, "key"))
                stages = effective_property(lane, "stages")
                if lane_key is None or not isinstance(stages, ArrayExpr):
                    return
                for stage in stages.elements:
                    if (stage_key := literal_string(effective_property(stage, "key"))) is None:
                        return
                    launched.add(f"{lane_key}.{stage_key}")
    for call in ctx.facts.dialect(MemberCall):
        key_node = call.fact.arg(0)
        key = literal_string(key_node)
        if call.fact.target == "runs.steer" and key is not None and key not in launched:
            assert key_node is not None
            yield ctx.finding("SUBAGENTS_STEER", f"runs.steer('{key}') requires a prior runs.run/runs.all launch "
                              "with that key.", *_span(call, key_node))  # fmt: skip


# -- workspace: agents and models --------------------------------------------------------------------


def _children(ctx: RuleContext) -> Iterator[tuple[Placed[MemberCall], ObjectExpr]]:
    for call in ctx.facts.dialect(MemberCall):
        target = call.fact.target
        params = call.fact.arg(1)
        if target == "runs.run" and isinstance(params, ObjectExpr):
            yield call, params
        elif target == "runs.all":
            for _, item in _all_items(call):
                yield call, item
        elif target == "runs.lanes":
            for _, _, stage in lane_stages(call.fact.arg(0)):
                yield call, stage


def check_agents(ctx: RuleContext) -> Iterator[Finding]:
    catalog = ctx.capabilities.agent_catalog
    if catalog is None:
        return
    for call, params in _children(ctx):
        node = effective_property(params, "agent")
        name = literal_string(node)
        if node is None or name is None or catalog.get(name) is not None:
            continue
        start, end = _span(call, node)
        if catalog.is_disabled(name):
            where = " or ".join(str(path) for path in catalog.settings.files) or "pi's settings.json"
            yield ctx.finding("SUBAGENTS_AGENT", f"Agent '{name}' is disabled (subagents.agentOverrides.{name}."
                              f"disabled is true in {where}).", start, end)  # fmt: skip
            continue
        names = catalog.names
        yield ctx.finding(
            "SUBAGENTS_AGENT",
            f"Unknown agent '{name}'. Available agents: {', '.join(sorted(names))}. Define it in "
            "~/.pi/agent/agents/<name>.md or the project's .pi/agents/ (trusted projects).",
            start, end, fixes=ctx.did_you_mean(node, call.base, name, names),
        )  # fmt: skip


@dataclass(frozen=True)
class ChildModels:
    """What spec B resolves a child's literal model against, as the rules see it (hover shares it)."""

    availability: ModelAvailability | None
    """None when there is neither a registry nor a launch model to resolve against."""
    agent_names: Collection[str]

    @property
    def known(self) -> frozenset[str] | None:
        """The models a bare id may resolve to; None when availability cannot be verified."""
        availability = self.availability
        return availability.known if availability is not None and availability.verified else None

    def resolve(self, requested: str) -> tuple[str, str | None]:
        """`(model, thinking)`, or the spec's WorkflowError."""
        launch = self.availability.launch_model if self.availability is not None else ""
        provider = launch.partition("/")[0] if "/" in launch else None
        return resolve_subagent_model(requested, known=self.known, current_provider=provider,
                                      agent_names=self.agent_names)


def child_models(caps: Capabilities) -> ChildModels:
    known = caps.resolvable_models
    verified = caps.verified_models and bool(known)
    launch = caps.launch_model or (min(caps.models) if caps.models else None)
    availability = None if launch is None and not verified else ModelAvailability(verified, known, caps.models,
                                                                                   launch or "")
    catalog = caps.agent_catalog
    return ChildModels(availability, catalog.names if catalog is not None else ())


def check_models(ctx: RuleContext) -> Iterator[Finding]:
    models = child_models(ctx.capabilities)
    availability, known = models.availability, models.known
    catalog = ctx.capabilities.agent_catalog
    for call, params in _children(ctx):
        members = _members(params)
        if "thinking" in members:
            yield ctx.finding("SUBAGENTS_MODEL", "thinking is ignored on dispatch; put the level on the model "
                              "instead, e.g. model: 'provider/id:high'.", *_span(call, members["thinking"]),
                              severity="warning")  # fmt: skip
        node = members["model"].value if "model" in members else None
        model = literal_string(node)
        if node is not None and model is not None:
            if not model.strip() or any(ch.isspace() for ch in model.strip()):
                yield ctx.finding("SUBAGENTS_MODEL", f"Invalid subagent model '{model}': write provider/id[:thinking].",
                                  *_span(call, node))  # fmt: skip
                continue
            if model.strip() == "inherit":
                continue
            try:
                models.resolve(model)
            except WorkflowError as error:
                fixes = ctx.did_you_mean(node, call.base, model, known or ())
                yield ctx.finding("SUBAGENTS_MODEL", error.message, *_span(call, node), fixes=fixes)
            continue
        agent_node = effective_property(params, "agent")
        definition = catalog.get(name) if catalog is not None and (name := literal_string(agent_node)) else None
        if definition is None or availability is None or agent_node is None:
            continue
        try:
            resolve_child_model(None, definition, catalog=catalog, availability=availability)  # type: ignore[arg-type]
        except WorkflowError as error:
            where = f" ({definition.path}:{definition.line + 1})" if definition.path else ""
            yield ctx.finding("SUBAGENTS_MODEL", f"Agent '{definition.name}' model{where}: {error.message}",
                              *_span(call, agent_node))  # fmt: skip


# -- workflow-level fields on the pragma line ------------------------------------------------------

WORKFLOW_FIELDS: Final = ("defaults", "maxRuntimeMs", "timeoutMs", "usageBudget")
_FIELDS_PRAGMA: Final = re.compile(r"\A(\ufeff?[ \t]*//[ \t]*piflow:[ \t]*pi-subagents[ \t]*)(\{[^\r\n]*?)[ \t]*$",
                                   re.MULTILINE)


class WorkflowFieldsError(ValueError):
    """A bad pragma JSON: the message, and the span of the JSON text in characters of line 1."""

    def __init__(self, message: str, start: int, end: int) -> None:
        super().__init__(message)
        self.message, self.start, self.end = message, start, end


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _check_usage_budget(value: Any) -> str | None:
    if not isinstance(value, dict) or not value or set(value) - {"tokens", "costUsd"}:
        return "usageBudget must be an object with tokens and/or costUsd."
    if "tokens" in value and not _positive_int(value["tokens"]):
        return "usageBudget.tokens must be a positive integer."
    cost = value.get("costUsd", 1)
    if isinstance(cost, bool) or not isinstance(cost, (int, float)) or not 0 < cost < float("inf"):
        return "usageBudget.costUsd must be a positive number."
    return None


CHILD_OWN_FIELDS: Final = ("agent", "task", "resume", "key", "lane", "async")
"""Child params that name one child (or, `async`, the workflow itself): never defaults (A.1)."""


def workflow_fields(script: str) -> dict[str, Any]:
    """The pi-subagents envelope's workflow-only fields, written as a JSON object after the pragma.

    `// piflow: pi-subagents {"timeoutMs": 60000, "usageBudget": {...}, "defaults": {...}}` stands
    for the `subagent` tool's top-level fields (SUBAGENTS_SPEC A.1). Returns them normalised
    (`maxRuntimeMs` folded into `timeoutMs`); raises WorkflowFieldsError with the span to mark.
    """
    match = _FIELDS_PRAGMA.match(script)
    if match is None:
        return {}
    start, end = match.start(2), match.end(2)

    def bad(message: str) -> WorkflowFieldsError:
        return WorkflowFieldsError(message, start, end)

    try:
        fields = json.loads(match.group(2))
    except json.JSONDecodeError as exc:
        raise bad(f"The pi-subagents pragma's workflow fields must be one JSON object: {exc.msg} "
                  f"(column {start + exc.colno}).") from None  # fmt: skip
    if not isinstance(fields, dict):
        raise bad("The pi-subagents pragma's workflow fields must be one JSON object.")
    unknown = sorted(set(fields) - set(WORKFLOW_FIELDS))
    if unknown:
        raise bad(f"Unknown workflow field '{unknown[0]}' after the pi-subagents pragma. Known fields: "
                  f"{', '.join(WORKFLOW_FIELDS)}.")  # fmt: skip
    for name in ("timeoutMs", "maxRuntimeMs"):
        if name in fields and not _positive_int(fields[name]):
            raise bad(f"{name} must be a positive integer.")
    timeout, runtime = fields.pop("timeoutMs", None), fields.pop("maxRuntimeMs", None)
    if timeout is not None and runtime is not None and timeout != runtime:
        raise bad(f"timeoutMs and maxRuntimeMs are aliases; they must agree (got {timeout} and {runtime}).")
    if timeout is not None or runtime is not None:
        fields["timeoutMs"] = timeout if timeout is not None else runtime
    if "usageBudget" in fields and (problem := _check_usage_budget(fields["usageBudget"])) is not None:
        raise bad(problem)
    if "defaults" in fields and not isinstance(fields["defaults"], dict):
        raise bad("defaults must be an object of child params.")
    own = sorted(set(fields.get("defaults") or {}) & set(CHILD_OWN_FIELDS))
    if own:
        raise bad(f"defaults.{own[0]} is not a workflow default: set it on each runs.run / runs.all item.")
    return dict(fields)


def check_workflow_fields(ctx: RuleContext) -> Iterator[Finding]:
    try:
        workflow_fields(ctx.document.text)
    except WorkflowFieldsError as exc:
        prefix = len(ctx.document.text[: exc.start].encode())
        length = len(ctx.document.text[exc.start : exc.end].encode())
        yield ctx.finding("INVALID_METADATA", exc.message, prefix, prefix + length)
