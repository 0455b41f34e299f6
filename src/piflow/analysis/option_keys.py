"""The keys of the primitives' option objects — what each does and accepts — and the editor lint for
keys that are not among them (`UNKNOWN_OPTION`, with a did-you-mean fix).

The key lists themselves are the engine's (`CORE_OPTION_KEYS`, the fields of `CheckpointInput`);
this module only documents them, and refuses to import when a documented list and an engine list
disagree, so hover, completion and the lint can never drift from what the host checks.

The lint is not part of the reference preflight (spec A.4 passes unknown agent options through), so
`preflight()` and launch never fail on it; the editor and `piflow check` show it as a warning.
`parallel`/`pipeline` take records of task, item and stage names (any key is valid) and budgets
are launch parameters, not script code, so neither has keys to check here.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from piflow.analysis.agent_options import CORE_OPTION_KEYS
from piflow.analysis.checkpoint import CheckpointInput
from piflow.analysis.expressions import ObjectExpr, PropertyExpr
from piflow.analysis.findings import Finding, Fix, TextEdit
from piflow.analysis.rules import RuleContext
from piflow.config.model_refs import THINKING_LEVELS

UNKNOWN_OPTION: Final = "UNKNOWN_OPTION"
"""The lint's rule id: piflow's own, deliberately not one of the spec's error codes."""


@dataclass(frozen=True, slots=True)
class OptionKey:
    """One documented key: its TypeScript-style type and what it does."""

    name: str
    type: str
    summary: str


@dataclass(frozen=True, slots=True)
class OptionObject:
    """The option object of a primitive: which argument holds it and the keys it accepts."""

    title: str
    """How hover names a key of it: `agent option`, `checkpoint field`."""
    noun: str
    """How the lint names a key of it: `Unknown option 'lable'`, `Unknown checkpoint field 'promt'`."""
    argument: int
    keys: Mapping[str, OptionKey]
    unknown_hint: str
    """What the lint adds when no key is close: what happens to an unknown key."""


def _documented(keys: Sequence[str], docs: Sequence[OptionKey]) -> dict[str, OptionKey]:
    """The docs in the engine's key order; an undocumented or extra key is a programming error."""
    by_name = {doc.name: doc for doc in docs}
    if set(by_name) != set(keys):
        raise RuntimeError(f"option docs {sorted(by_name)} do not match the engine's keys {sorted(keys)}")
    return {key: by_name[key] for key in keys}


AGENT_OPTIONS: Final = OptionObject(
    "agent option",
    "option",
    1,
    _documented(
        CORE_OPTION_KEYS,
        (
            OptionKey("label", "string", "Name shown for this agent in progress views and the journal "
                      "(non-empty string)."),
            OptionKey("model", "string", "Model as `provider/model[:thinking]`, a model alias from the workflow "
                      "settings, or a bare model id that is unique in the registry. Not allowed together with "
                      "`role`."),
            OptionKey("thinking", " | ".join(f'"{level}"' for level in THINKING_LEVELS),
                      f"Reasoning effort: {', '.join(THINKING_LEVELS)}. Not allowed together with `role`."),
            OptionKey("tools", "string[]", "Tool names the agent may use (each must be available to workflows). "
                      "Not allowed together with `role`."),
            OptionKey("role", "string", "A role file (`roles/<name>.md`) that fixes model, thinking and tools "
                      "and adds its text to the system prompt."),
            OptionKey("outputSchema", "JSONSchema", "A JSON Schema; the agent must submit a matching value "
                      "through `workflow_result`, which becomes the call's result."),
            OptionKey("retries", "number", "Extra attempts after a failed one (non-negative integer, default 0)."),
            OptionKey("timeoutMs", "number | null", "Time limit of each attempt in milliseconds (positive "
                      "integer, or null for none)."),
        ),
    ),
    "the host passes it on unused",
)

CHECKPOINT_FIELDS: Final = OptionObject(
    "checkpoint field",
    "checkpoint field",
    0,
    _documented(
        tuple(field.name for field in dataclasses.fields(CheckpointInput)),
        (
            OptionKey("name", "string", "Stable name of the question; its label (`name`, `name#2`, ...) is what "
                      "`piflow approve RUN LABEL` and the editor answer. Must be a literal string."),
            OptionKey("prompt", "string", "The question shown to the person (at most 1 KiB)."),
            OptionKey("context", "any (JSON)", "Data shown with the question, e.g. a draft to review (plain JSON, "
                      "at most 4 KiB)."),
        ),
    ),
    "the run fails at this checkpoint (it accepts only name, prompt and context)",
)

OPTION_OBJECTS: Final[Mapping[str, OptionObject]] = {
    "agent": AGENT_OPTIONS,
    "conversation": AGENT_OPTIONS,
    "checkpoint": CHECKPOINT_FIELDS,
}
"""The option object of each primitive call that has one, by the primitive's name."""


def option_markdown(owner: OptionObject, key: str) -> str:
    """Hover and completion documentation of one key."""
    doc = owner.keys[key]
    return f"**`{key}`** ({owner.title}) · `{doc.type}`\n\n{doc.summary}"


def suggestion(key: str, known: Sequence[str]) -> str | None:
    """The known key meant by a misspelled one: same letters in another case first, then the closest."""
    folded = [name for name in known if name.lower() == key.lower()]
    if folded:
        return folded[0]
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return close[0] if close else None


def check_option_keys(ctx: RuleContext) -> Iterator[Finding]:
    """Editor lint: a key of a literal option object that the primitive does not know."""
    data = ctx.document.data
    for statement, calls in ctx.memo.unchecked(ctx.facts, "option-keys"):
        clean = True
        for call in calls:
            owner = OPTION_OBJECTS.get(call.fact.kind)
            options = call.fact.arg(owner.argument) if owner is not None else None
            if owner is None or not isinstance(options, ObjectExpr):
                continue
            known = list(owner.keys)
            for member in options.properties:
                if not isinstance(member, PropertyExpr) or member.computed or member.key is None:
                    continue
                if member.key in owner.keys:
                    continue
                clean = False
                start, end = call.at(member.key_start), call.at(member.key_end)
                meant = suggestion(member.key, known)
                if meant is None:
                    message = f"Unknown {owner.noun} '{member.key}' — {owner.unknown_hint}; known: {', '.join(known)}"
                    yield ctx.finding(UNKNOWN_OPTION, message, start, end, severity="warning")
                    continue
                renamed = _renamed(data, member, start, end, meant)
                yield ctx.finding(
                    UNKNOWN_OPTION,
                    f"Unknown {owner.noun} '{member.key}' — did you mean '{meant}'?",
                    start,
                    end,
                    severity="warning",
                    fixes=[Fix(f"Change to '{meant}'", (TextEdit(ctx.range(start, end), renamed),))],
                )
        if clean:
            statement.clean.add("option-keys")


def _renamed(data: bytes, member: PropertyExpr, start: int, end: int, meant: str) -> str:
    """The key's new source text: quotes kept; a shorthand `{ lable }` keeps its value (`label: lable`)."""
    if member.shorthand:
        return f"{meant}: {data[start:end].decode('utf-8', 'surrogatepass')}"
    quote = data[start:start + 1]
    if quote in (b'"', b"'"):
        return f"{quote.decode()}{meant}{quote.decode()}"
    return meant
