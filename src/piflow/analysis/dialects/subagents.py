"""pi-subagents `workflowScript`: the `validate` rules (SUBAGENTS_SPEC A.12) and cheap literal checks.

The script is the body of an async function in sloppy script mode. Reference rules (what
`action:"validate"` reports, messages exact) come first; then literal checks of what the runtime
would certainly reject (E.2). Codes, all specific to this dialect:

| code | what |
|---|---|
| `SUBAGENTS_EMPTY` | blank script |
| `SUBAGENTS_SYNTAX` | acorn's syntax error (message without its position) |
| `SUBAGENTS_NESTED_ASYNC` | an async function, arrow or method anywhere in the script |
| `SUBAGENTS_KEY` | a literal `runs.run` / `runs.all` item / `runs.host` key breaking the key grammar |
| `SUBAGENTS_PARAMS` | literal child params that are not JSON |
| `SUBAGENTS_BOUNDARY` | a literal `emit`, `state.set` value or top-level `return` that is not JSON |
| `SUBAGENTS_KEYED_ACCESS` | `r.<key>` on the ordered array `runs.all` resolves to |
| `SUBAGENTS_HOST` | literal `runs.host` params |
| `SUBAGENTS_CHILD` | child params the runtime rejects (resume/agent, gate, legacy keys, clarify, worktree) |
| `SUBAGENTS_STEER` | literal `runs.steer` arguments the runtime rejects |
| `SUBAGENTS_UNAWAITED` | (warning) a `runs.run/steer/host` promise left unobserved |
| `SUBAGENTS_DEPRECATED` | (warning) `turnBudget`, removed in 0.59 |
| `SUBAGENTS_DUPLICATE_KEY` | one literal key launched with different literal params, or twice in one `runs.all` |
| `SUBAGENTS_ALL` | `runs.all` given something other than an array of objects |
| `SUBAGENTS_LANES` | the structure and limits of a literal `runs.lanes` argument (A.6) |
| `SUBAGENTS_AGENT` | (workspace) an agent no definition provides, or one `agentOverrides` disables |
| `SUBAGENTS_MODEL` | (workspace) a child model the registry cannot resolve (spec B's messages) |

The E.2 and workspace rules are editor rules: the reference's `validate` and a launch never run
them, because the runtime would reject these only when the script reaches the call.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Final

from tree_sitter import Query, QueryCursor

from piflow.analysis.capabilities import Capabilities
from piflow.analysis.dialects import SUBAGENTS
from piflow.analysis.dialects.subagents_children import (
    check_agents,
    check_all_shape,
    check_duplicate_keys,
    check_lanes,
    check_models,
    check_non_finite,
    check_steer_launched,
    check_workflow_fields,
    child_findings,
    lane_stages,
)
from piflow.analysis.dialects.subagents_facts import KEY_GRAMMAR as KEY_GRAMMAR  # the key grammar lives with the facts
from piflow.analysis.dialects.subagents_facts import MemberCall, RunsAllBinding, SubagentsFacts
from piflow.analysis.document import ScriptDocument
from piflow.analysis.engine_check import checker
from piflow.analysis.expressions import (
    UNKNOWN,
    ArrayExpr,
    Expr,
    IdentifierExpr,
    LiteralExpr,
    ObjectExpr,
    PropertyExpr,
    SpreadExpr,
    effective_property,
    literal_string,
    static_value,
)
from piflow.analysis.facts import Placed
from piflow.analysis.findings import Finding
from piflow.analysis.jsliterals import is_js_integer, js_blank
from piflow.analysis.rules import Dialect, RuleContext, RuleSpec
from piflow.analysis.syntax import LANGUAGE
from piflow.analysis.syntax_check import syntax_problems
from piflow.analysis.walker import WalkConfig

NAME: Final = SUBAGENTS
NESTED_ASYNC: Final = (
    "workflowScript does not support nested async functions. Use top-level await, plain helper functions "
    "that return runs.run(...), or explicit Promise chains."
)
LEGACY_KEYS: Final = frozenset(
    {
        "action",
        "workflowScript",
        "tasks",
        "chain",
        "parallel",
        "concurrency",
        "chainDir",
        "globalConcurrencyLimit",
        "maxSubagentSpawnsPerRun",
    }
)
LEGACY_MESSAGE: Final = (
    "runs.run accepts one child via { agent, task } and execution controls only; use runs.all(...) and "
    "JavaScript control flow for orchestration."
)
HOST_FIELDS: Final = ("kind", "command", "timeoutMs", "output", "role", "provider")
STEER_FIELDS: Final = ("mode", "index", "ackTimeoutMs")
_WRAPPER_PREFIX: Final = "(async () => {\n"
_MEMBER_QUERY: Final = Query(
    LANGUAGE, "(member_expression object: (identifier) @object property: (property_identifier) @property)"
)


def _span(call: Placed[Any], node: Expr | PropertyExpr | None) -> tuple[int, int]:
    target = node if node is not None else call.fact
    return call.at(target.start), call.at(target.end)


def _calls(ctx: RuleContext, *targets: str) -> Iterator[Placed[MemberCall]]:
    return (call for call in ctx.facts.dialect(MemberCall) if call.fact.target in targets)


# -- validate (A.12) -------------------------------------------------------------------------------


def check_empty(ctx: RuleContext) -> Iterator[Finding]:
    if js_blank(ctx.document.text):
        yield ctx.finding("SUBAGENTS_EMPTY", "workflowScript must not be empty.", 0, len(ctx.document.data))


def check_syntax(ctx: RuleContext) -> Iterator[Finding]:
    document = ctx.document
    if js_blank(document.text):
        return
    if ctx.compile:
        error = checker().acorn_error(_WRAPPER_PREFIX + document.text + "\n})", module=False)
        if error is not None:
            start = document.index.utf16_to_byte(max(error.offset - len(_WRAPPER_PREFIX), 0))
            end = document.index.utf16_to_byte(max(error.end_offset - len(_WRAPPER_PREFIX), 0))
            yield ctx.finding(
                "SUBAGENTS_SYNTAX",
                error.message,
                min(start, len(document.data)),
                min(max(end, start), len(document.data)),
            )
        return
    for problem in syntax_problems(document, ctx.facts, compile=False, module=False):
        yield ctx.finding("SUBAGENTS_SYNTAX", problem.bare, problem.start, problem.end)


def check_nested_async(ctx: RuleContext) -> Iterator[Finding]:
    data = ctx.document.data
    for item in ctx.facts.statements:
        for function in item.fact.async_functions:
            start = item.at(function.start)
            keyword = data.find(b"async", start, item.at(function.end))
            at = keyword if keyword >= 0 else start
            yield ctx.finding(
                "SUBAGENTS_NESTED_ASYNC", NESTED_ASYNC, at, at + 5 if keyword >= 0 else item.at(function.end)
            )


def _key_problem(node: Expr | None) -> bool:
    key = literal_string(node)
    return key is not None and KEY_GRAMMAR.match(key) is None


def _key_message(what: str) -> str:
    return (
        f"{what} must be 1-128 characters using letters, numbers, '.', '_' or '-', and start with a letter or number."
    )


def _all_items(call: Placed[MemberCall]) -> Iterator[tuple[int, ObjectExpr]]:
    items = call.fact.arg(0)
    if isinstance(items, ArrayExpr):
        for index, item in enumerate(items.elements):
            if isinstance(item, ObjectExpr):
                yield index, item


def check_keys(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.facts.dialect(MemberCall):
        target = call.fact.target
        if target in ("runs.run", "runs.host") and _key_problem(call.fact.arg(0)):
            yield ctx.finding("SUBAGENTS_KEY", _key_message(f"{target} key"), *_span(call, call.fact.arg(0)))
        elif target == "runs.all":
            for _, item in _all_items(call):
                key = effective_property(item, "key")
                if _key_problem(key):
                    yield ctx.finding("SUBAGENTS_KEY", _key_message("runs.all item key"), *_span(call, key))


def json_reason(node: Expr | None, *, allow_undefined: bool = False) -> str | None:
    """Why a literal is certainly not JSON, in validate's words (None: JSON, or not known)."""
    if node is None:
        return None
    if node.kind in ("function", "class"):
        return "functions are not JSON-representable"
    if isinstance(node, LiteralExpr):
        if node.kind == "bigint":
            return "BigInt values are not JSON-representable"
        if node.kind == "regex":
            return "regular expressions are not JSON-representable"
        return None
    if isinstance(node, IdentifierExpr):
        return None if allow_undefined or node.name != "undefined" else "undefined is not JSON-representable"
    if isinstance(node, ArrayExpr):
        if any(element is None for element in node.elements) and not allow_undefined:
            return "sparse arrays are not JSON-representable"
        children: list[Expr | None] = list(node.elements)
    elif isinstance(node, ObjectExpr):
        children = [prop.value if isinstance(prop, PropertyExpr) else None for prop in node.properties]
    else:
        return None
    return next((reason for child in children if (reason := json_reason(child, allow_undefined=allow_undefined))), None)


def check_params(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.facts.dialect(MemberCall):
        if call.fact.target == "runs.run":
            reason = json_reason(call.fact.arg(1))
            if reason:
                yield ctx.finding(
                    "SUBAGENTS_PARAMS", f"runs.run params are invalid: {reason}.", *_span(call, call.fact.arg(1))
                )
        elif call.fact.target == "runs.all":
            for _, item in _all_items(call):
                reason = json_reason(item)
                if reason:
                    yield ctx.finding(
                        "SUBAGENTS_PARAMS", f"runs.all item params are invalid: {reason}.", *_span(call, item)
                    )


def check_boundary(ctx: RuleContext) -> Iterator[Finding]:
    values: list[tuple[int, int, str | None]] = []
    for call in _calls(ctx, "emit", "state.set"):
        value = call.fact.arg(0 if call.fact.target == "emit" else 1)
        values.append((*_span(call, value), json_reason(value)))
    for item in ctx.facts.statements:
        for returned in item.fact.returns:
            if returned.argument is not None:
                reason = json_reason(returned.argument, allow_undefined=True)
                values.append((item.at(returned.argument.start), item.at(returned.argument.end), reason))
    for start, end, reason in sorted(values):
        if reason:
            yield ctx.finding("SUBAGENTS_BOUNDARY", f"workflowScript boundary value is invalid: {reason}.", start, end)


def check_keyed_access(ctx: RuleContext) -> Iterator[Finding]:
    bindings = [(binding.at(binding.fact.end), binding.fact) for binding in ctx.facts.dialect(RunsAllBinding)]
    if not bindings:
        return
    data = ctx.document.data
    matches = QueryCursor(_MEMBER_QUERY).matches(ctx.document.tree.root_node)
    for _, captures in matches:
        obj, prop = captures["object"][0], captures["property"][0]
        name, key = data[obj.start_byte : obj.end_byte].decode(), data[prop.start_byte : prop.end_byte].decode()
        for after, binding in bindings:
            if binding.name == name and key in binding.keys and obj.start_byte >= after:
                yield ctx.finding(
                    "SUBAGENTS_KEYED_ACCESS",
                    f"runs.all returns an ordered array; '{name}.{key}' is keyed access. "
                    "Use an index, destructuring, or map(...).",
                    obj.start_byte,
                    prop.end_byte,
                )


def check_host(ctx: RuleContext) -> Iterator[Finding]:
    for call in _calls(ctx, "runs.host"):
        params = call.fact.arg(1)
        if not isinstance(params, ObjectExpr):
            continue
        yield from _host_findings(ctx, call, params)


def _host_findings(ctx: RuleContext, call: Placed[MemberCall], params: ObjectExpr) -> Iterator[Finding]:
    complete = not any(isinstance(prop, SpreadExpr) or prop.computed for prop in params.properties)
    prefix = "runs.host params"

    def problem(message: str, node: Expr | PropertyExpr | None = None) -> Finding:
        return ctx.finding("SUBAGENTS_HOST", f"{prefix} {message}", *_span(call, node or params))

    for prop in params.properties:
        if isinstance(prop, PropertyExpr) and prop.key is not None and prop.key not in HOST_FIELDS:
            hint = (
                " A host step runs in the workflow's cwd: set cwd on the outer request or use `cd dir && cmd`."
                if prop.key == "cwd"
                else ""
            )
            yield problem(f"contain unsupported field '{prop.key}'.{hint}", prop)
    values = {key: effective_property(params, key) for key in HOST_FIELDS}
    known = {key: static_value(node) for key, node in values.items()}
    if values["kind"] is None:
        if complete:
            yield problem("require kind: 'command'.")
    elif known["kind"] is not UNKNOWN and known["kind"] != "command":
        yield problem("kind must be 'command'.", values["kind"])
    if values["command"] is None:
        if complete:
            yield problem("require command.")
    elif known["command"] is not UNKNOWN and (not isinstance(known["command"], str) or js_blank(known["command"])):
        yield problem("command must be non-empty.", values["command"])
    if values["timeoutMs"] is None:
        if complete:
            yield problem("require timeoutMs.")
    elif known["timeoutMs"] is not UNKNOWN and not (is_js_integer(known["timeoutMs"]) and known["timeoutMs"] > 0):
        yield problem("timeoutMs must be a positive integer.", values["timeoutMs"])
    output = known["output"]
    if values["output"] is not None and output is not UNKNOWN and not _relative_path(output):
        yield problem("output must be a non-empty relative path without traversal.", values["output"])
    if values["role"] is not None and known["role"] is not UNKNOWN and known["role"] not in ("ci", "gate"):
        yield problem("role must be 'ci' or 'gate'.", values["role"])


def _relative_path(value: Any) -> bool:
    if (
        not isinstance(value, str)
        or not value.strip()
        or value.startswith(("/", "\\"))
        or re.match(r"^[A-Za-z]:", value)
    ):
        return False
    return ".." not in re.split(r"[\\/]", value) and not any(ord(ch) < 32 for ch in value)


# -- runtime literal checks (E.2) ------------------------------------------------------------------


def check_child_params(ctx: RuleContext) -> Iterator[Finding]:
    for call in ctx.facts.dialect(MemberCall):
        if call.fact.target == "runs.run" and isinstance(call.fact.arg(1), ObjectExpr):
            params = call.fact.arg(1)
            assert isinstance(params, ObjectExpr)
            yield from _child_findings(ctx, call, params, "runs.run")
            yield from child_findings(ctx, call, params, "runs.run")
        elif call.fact.target == "runs.all":
            for index, item in _all_items(call):
                yield from _child_findings(ctx, call, item, f"runs.all item {index}")
                yield from child_findings(ctx, call, item, f"runs.all item {index}")
        elif call.fact.target == "runs.lanes":
            for lane, stage, item in lane_stages(call.fact.arg(0)):
                label = f"runs.lanes lane {lane} stage {stage}"
                yield from _child_findings(ctx, call, item, label, lanes=True)
                yield from child_findings(ctx, call, item, label)


def _child_findings(
    ctx: RuleContext, call: Placed[MemberCall], params: ObjectExpr, label: str, *, lanes: bool = False
) -> Iterator[Finding]:
    members = {prop.key: prop for prop in params.properties if isinstance(prop, PropertyExpr) and prop.key is not None}

    def problem(message: str, key: str) -> Finding:
        return ctx.finding("SUBAGENTS_CHILD", message, *_span(call, members[key]))

    for key in members:
        if key in LEGACY_KEYS:
            yield problem(LEGACY_MESSAGE, key)
    if "clarify" in members:
        yield problem(f"{label} does not support clarify UI.", "clarify")
    worktree = static_value(members["worktree"].value) if "worktree" in members else UNKNOWN
    if worktree is not UNKNOWN and not isinstance(worktree, bool):
        yield problem(f"{label} worktree must be true or false.", "worktree")
    if "gate" in members and "acceptance" in members:
        yield problem(
            f"{label} gate cannot be combined with acceptance; use one gate command or acceptance.verify.", "gate"
        )
    if "gate" in members and "resume" in members and not lanes:
        yield problem(f"{label} gate is not supported with retained resume.", "gate")
    if "resume" in members and "agent" in members:
        yield problem(f"{label} resume and agent are mutually exclusive.", "resume")
    if "resume" in members:
        task = static_value(members["task"].value) if "task" in members else None
        if ("task" not in members and not any(isinstance(prop, SpreadExpr) for prop in params.properties)) or (
            task is not UNKNOWN and (not isinstance(task, str) or js_blank(task))
        ):
            yield problem(f"{label} resume requires a non-empty task follow-up.", "resume")
    if "turnBudget" in members:
        yield ctx.finding(
            "SUBAGENTS_DEPRECATED",
            "turnBudget was removed in pi-subagents 0.59; it has no effect.",
            *_span(call, members["turnBudget"]),
            severity="warning",
        )


def check_steer(ctx: RuleContext) -> Iterator[Finding]:
    for call in _calls(ctx, "runs.steer"):
        fact = call.fact
        if _key_problem(fact.arg(0)):
            yield ctx.finding("SUBAGENTS_STEER", "runs.steer has an invalid key.", *_span(call, fact.arg(0)))
        message = static_value(fact.arg(1)) if fact.arg(1) is not None else None
        if message is not UNKNOWN and (not isinstance(message, str) or js_blank(message)):
            yield ctx.finding(
                "SUBAGENTS_STEER", "runs.steer message must be a non-empty string.", *_span(call, fact.arg(1))
            )
        options = fact.arg(2)
        if isinstance(options, ObjectExpr):
            yield from _steer_options(ctx, call, options)


def _steer_options(ctx: RuleContext, call: Placed[MemberCall], options: ObjectExpr) -> Iterator[Finding]:
    for prop in options.properties:
        if isinstance(prop, PropertyExpr) and prop.key is not None and prop.key not in STEER_FIELDS:
            yield ctx.finding(
                "SUBAGENTS_STEER", f"runs.steer options contain unsupported field '{prop.key}'.", *_span(call, prop)
            )
    checks = (
        (
            "mode",
            lambda v: v in ("steer", "follow_up", "auto"),
            "runs.steer mode must be 'steer', 'follow_up', or 'auto'.",
        ),
        (
            "index",
            lambda v: is_js_integer(v) and 0 <= v <= 1_000_000,
            "runs.steer index must be an integer between 0 and 1000000.",
        ),
        ("ackTimeoutMs", lambda v: is_js_integer(v) and v > 0, "runs.steer ackTimeoutMs must be a positive integer."),
    )
    for key, valid, message in checks:
        node = effective_property(options, key)
        value = static_value(node)
        if node is not None and value is not UNKNOWN and not valid(value):
            yield ctx.finding("SUBAGENTS_STEER", message, *_span(call, node))


def check_unawaited(ctx: RuleContext) -> Iterator[Finding]:
    for call in _calls(ctx, "runs.run", "runs.steer", "runs.host"):
        if call.fact.observed:
            continue
        key = literal_string(call.fact.arg(0))
        what = f"{call.fact.target}('{key}')" if key is not None else call.fact.target
        yield ctx.finding(
            "SUBAGENTS_UNAWAITED",
            f"{what} is never awaited: the workflow fails when it completes with an unobserved call. "
            "Await or return it.",
            call.at(call.fact.start),
            call.at(call.fact.end),
            severity="warning",
        )


RULES: Final = (
    RuleSpec("empty", check_empty, reference=True),
    RuleSpec("syntax", check_syntax, reference=True),
    RuleSpec("nested-async", check_nested_async, reference=True),
    RuleSpec("keys", check_keys, reference=True),
    RuleSpec("params", check_params, reference=True),
    RuleSpec("boundary", check_boundary, reference=True),
    RuleSpec("keyed-access", check_keyed_access, reference=True),
    RuleSpec("host", check_host, reference=True),
    RuleSpec("child-params", check_child_params, reference=False),
    RuleSpec("steer", check_steer, reference=False),
    RuleSpec("unawaited", check_unawaited, reference=False),
    RuleSpec("duplicate-keys", check_duplicate_keys, reference=False),
    RuleSpec("all-shape", check_all_shape, reference=False),
    RuleSpec("lanes", check_lanes, reference=False),
    RuleSpec("non-finite", check_non_finite, reference=False),
    RuleSpec("steer-launched", check_steer_launched, reference=False),
    RuleSpec("agents", check_agents, reference=False),
    RuleSpec("models", check_models, reference=False),
    RuleSpec("workflow-fields", check_workflow_fields, reference=False),
)

DIALECT: Final = Dialect(
    NAME, WalkConfig(strict=False, module=False, dialect_facts=SubagentsFacts), RULES, "SUBAGENTS_SYNTAX"
)


def validate_subagents_script(script: str, *, compile: bool = True) -> dict[str, Any]:
    """`action:"validate"`: `{ok, errors: [{message, line, column}]}` (body line, 1-based column)."""
    document = ScriptDocument(script)
    ctx = RuleContext(document, document.facts(DIALECT.walk), Capabilities(), preflight=True, compile=compile)
    errors = []
    for rule in RULES:
        if not rule.reference:
            continue
        for finding in rule.check(ctx):
            offset = document.index.utf16_to_byte(finding.range.start_offset)
            line, column = document.index.js_line_column(offset)
            errors.append({"message": finding.message, "line": line, "column": column + 1})
    return {"ok": not errors, "errors": errors}
