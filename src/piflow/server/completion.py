"""Completion while typing: model ids and aliases, roles, tools, thinking levels, option keys, snippets.

Half-typed code rarely parses, so the context comes from a small lexical scan of the statement
before the cursor (brackets, strings, comments, template literals) rather than from the tree:
inside a string after `model:` of an agent call's options → models; after `role:` → roles; in the
`tools: [...]` array → tools; at a key position of an agent's options or a checkpoint's fields →
their keys; elsewhere, at the start of an identifier → primitive snippets.

pi-subagents scripts get the same from their `runs.*` calls: after `runs.` / `state.` → the
methods; at a key of a params object (`runs.run` params, `runs.all` items, lanes and their stages,
`runs.host` params, `runs.steer` options) → its keys; inside `agent: "` → the agent definitions;
`model: "` → models, then thinking levels after `:`; enumerated values (`context`, `outputMode`,
steer `mode`, host `kind`/`role`, a stage's `resume`) → their values; at an identifier → `runs.*`,
`emit` and `state.*` snippets.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

from lsprotocol import types

from piflow.analysis.dialects.subagents import NAME as SUBAGENTS
from piflow.analysis.option_keys import AGENT_OPTIONS, OPTION_OBJECTS, OptionObject, option_markdown
from piflow.config.model_refs import THINKING_LEVELS
from piflow.server.base import LanguageFeature, handler
from piflow.server.docs import (
    ALL_ITEM,
    CHILD_PARAMS,
    HOST_PARAMS,
    LANE,
    PRIMITIVES,
    STAGE,
    STEER_OPTIONS,
    SUBAGENT_GLOBALS,
    THINKING_DOCS,
    Global,
    ParamObject,
    agent_markdown,
    global_markdown,
    param_markdown,
    primitive_markdown,
)
from piflow.server.documents import DocumentTable
from piflow.server.snapshot import DocumentKind, Snapshot

_KEY_BEFORE: Final = re.compile(r"""(?:([A-Za-z_$][\w$]*)|"([^"]*)"|'([^']*)')\s*:\s*$""")
_CALL_BEFORE: Final = re.compile(r"(?<![\w$.])(" + "|".join(OPTION_OBJECTS) + r")\s*$")
_IDENTIFIER_PREFIX: Final = re.compile(r"[A-Za-z_$][\w$]*$")
_KEY_POSITION: Final = re.compile(r"[{,]\s*([A-Za-z_$][\w$]*)?$")
_RUNS_CALL_BEFORE: Final = re.compile(r"(?<![\w$.])runs\s*\.\s*(run|all|lanes|host|steer)\s*$")
_MEMBER_BEFORE: Final = re.compile(r"(?<![\w$.])(runs|state)\s*\.\s*([A-Za-z_$][\w$]*)?$")
_RUNS_PARAMS: Final[dict[tuple[str, int], ParamObject]] = {
    ("run", 1): CHILD_PARAMS, ("host", 1): HOST_PARAMS, ("steer", 2): STEER_OPTIONS,
}
"""`runs.<method>` and the argument that is a params object literal."""
_RUNS_ARRAYS: Final[dict[str, ParamObject]] = {"all": ALL_ITEM, "lanes": LANE}
"""`runs.<method>` whose first argument is an array of params objects."""

_CLOSES: Final = {")": ("(",), "]": ("[",), "}": ("{", "${")}

Slot = Literal["model", "role", "thinking", "tool", "option", "primitive", "agent", "value", "param", "member"]
_VALUE_SLOTS: Final[dict[str, Slot]] = {"model": "model", "role": "role", "thinking": "thinking"}


@dataclass
class _Frame:
    """An open bracket: `(`, `[`, `{`, a template literal (`` ` ``) or a template substitution (`${`)."""

    char: str
    start: int
    commas: int = 0


@dataclass
class _Scan:
    frames: list[_Frame] = field(default_factory=list)
    string_start: int | None = None
    """Where the string literal holding the cursor starts (its quote), if any."""
    in_comment: bool = False


def _scan(text: str, start: int, end: int) -> _Scan:
    """Lexical state at `end`, scanning from a statement boundary at `start`."""
    state = _Scan()
    frames = state.frames
    i = start
    while i < end:
        char = text[i]
        top = frames[-1].char if frames else ""
        if top == "`":  # inside a template literal's text
            if char == "\\":
                i += 2
                continue
            if char == "`":
                frames.pop()
            elif text.startswith("${", i):
                frames.append(_Frame("${", i))
                i += 2
                continue
            i += 1
            continue
        if text.startswith("//", i):
            newline = text.find("\n", i, end)
            if newline < 0:
                state.in_comment = True
                return state
            i = newline + 1
            continue
        if text.startswith("/*", i):
            close = text.find("*/", i + 2, end)
            if close < 0:
                state.in_comment = True
                return state
            i = close + 2
            continue
        if char in "\"'":
            j = i + 1
            while j < end and text[j] != char and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            if j >= end:
                state.string_start = i
                return state
            i = j + 1
            continue
        if char == "`":
            frames.append(_Frame("`", i))
        elif char in "([{":
            frames.append(_Frame(char, i))
        elif char in ")]}":
            if frames and frames[-1].char in _CLOSES[char]:
                frames.pop()
        elif char == "," and frames:
            frames[-1].commas += 1
        i += 1
    return state


def _option_frame(text: str, frames: list[_Frame], index: int) -> OptionObject | None:
    """The option object `frames[index]` is: a literal in the options argument of a primitive call."""
    if index < 1 or frames[index].char != "{":
        return None
    call = frames[index - 1]
    if call.char != "(":
        return None
    callee = _CALL_BEFORE.search(text, max(0, call.start - 64), call.start)
    owner = OPTION_OBJECTS.get(callee.group(1)) if callee is not None else None
    if owner is None or call.commas != owner.argument:
        return None
    between = text[call.start + 1 : frames[index].start].rstrip()
    return owner if (between.endswith(",") if owner.argument else not between) else None


def _options_frame(text: str, frames: list[_Frame], index: int) -> bool:
    """Whether `frames[index]` is an object literal in the second argument of an agent/conversation call."""
    return _option_frame(text, frames, index) is AGENT_OPTIONS


def _runs_method(text: str, call: _Frame) -> str | None:
    """The `runs.<method>` called with the argument list `call` opens, if any."""
    found = _RUNS_CALL_BEFORE.search(text, max(0, call.start - 64), call.start)
    return found.group(1) if found is not None else None


def _first_argument(text: str, call: _Frame, inner: _Frame) -> bool:
    return call.commas == 0 and not text[call.start + 1 : inner.start].strip()


def params_frame(text: str, frames: list[_Frame], index: int) -> ParamObject | None:
    """The params object `frames[index]` is, when it is a literal a `runs.*` call takes (see module doc)."""
    if index < 1 or frames[index].char != "{":
        return None
    outer = frames[index - 1]
    if outer.char == "(":
        method = _runs_method(text, outer)
        owner = _RUNS_PARAMS.get((method or "", outer.commas))
        if owner is None or not text[outer.start + 1 : frames[index].start].rstrip().endswith(","):
            return None
        return owner
    if outer.char != "[" or index < 2:
        return None
    holder = frames[index - 2]
    if holder.char == "(":
        owner = _RUNS_ARRAYS.get(_runs_method(text, holder) or "")
        return owner if owner is not None and _first_argument(text, holder, outer) else None
    stages = _KEY_BEFORE.search(text, holder.start + 1, outer.start)
    named = stages.group(1) or stages.group(2) or stages.group(3) if stages else None
    return STAGE if named == "stages" and params_frame(text, frames, index - 2) is LANE else None


@dataclass(frozen=True)
class Context:
    slot: Slot
    prefix: str
    prefix_start: int
    """Character index where the typed prefix starts (the completion replaces it)."""
    owner: OptionObject | None = None
    """For option keys: the option object whose keys are offered."""
    params: ParamObject | None = None
    """For pi-subagents params keys and values: the params object."""
    key: str | None = None
    """For an enumerated value (`value`) or a member (`member`: `runs`/`state`): the key or object."""


def completion_context(text: str, start: int, offset: int) -> Context | None:
    """What may be completed at character `offset` of `text` (`start`: a statement boundary before it)."""
    state = _scan(text, start, offset)
    if state.in_comment:
        return None
    frames = state.frames
    if state.string_start is not None:
        prefix = text[state.string_start + 1 : offset]
        if not frames:
            return None
        top = len(frames) - 1
        before = text[frames[top].start + 1 : state.string_start]
        params = params_frame(text, frames, top) if frames[top].char == "{" else None
        if params is not None:
            key = _KEY_BEFORE.search(before)
            name = key.group(1) or key.group(2) or key.group(3) if key else None
            if name == "model" and "model" in params.keys:
                if ":" in prefix:
                    level = prefix.rsplit(":", 1)[1]
                    return Context("thinking", level, offset - len(level))
                return Context("model", prefix, state.string_start + 1, params=params)
            if name == "agent" and "agent" in params.keys:
                return Context("agent", prefix, state.string_start + 1)
            if name in params.keys and params.keys[name].values:
                return Context("value", prefix, state.string_start + 1, params=params, key=name)
            return None
        if frames[top].char == "{" and _options_frame(text, frames, top):
            key = _KEY_BEFORE.search(before)
            name = key.group(1) or key.group(2) or key.group(3) if key else None
            if name == "model" and ":" in prefix:
                level = prefix.rsplit(":", 1)[1]
                return Context("thinking", level, offset - len(level))
            slot = _VALUE_SLOTS.get(name or "")
            if slot is not None:
                return Context(slot, prefix, state.string_start + 1)
        if frames[top].char == "[" and _options_frame(text, frames, top - 1):
            holder = _KEY_BEFORE.search(text, frames[top - 1].start + 1, frames[top].start)
            if holder and (holder.group(1) or holder.group(2) or holder.group(3)) == "tools":
                return Context("tool", prefix, state.string_start + 1)
        return None
    params = params_frame(text, frames, len(frames) - 1) if frames else None
    if params is not None:
        key = _KEY_POSITION.search(text, frames[-1].start, offset)
        if key is None:
            return None
        prefix = key.group(1) or ""
        return Context("param", prefix, offset - len(prefix), params=params)
    owner = _option_frame(text, frames, len(frames) - 1) if frames else None
    if owner is not None:
        key = _KEY_POSITION.search(text, frames[-1].start, offset)
        if key is not None:
            prefix = key.group(1) or ""
            return Context("option", prefix, offset - len(prefix), owner)
        return None
    member = _MEMBER_BEFORE.search(text, max(start, offset - 64), offset)
    if member is not None:
        prefix = member.group(2) or ""
        return Context("member", prefix, offset - len(prefix), key=member.group(1))
    word = _IDENTIFIER_PREFIX.search(text, max(start, offset - 64), offset)
    if word is not None and (word.start() == 0 or text[word.start() - 1] != "."):
        return Context("primitive", word.group(), word.start())
    return None


def _statement_start(snapshot: Snapshot, offset: int) -> int:
    """Byte offset of the top-level statement the cursor is in or after (half-typed code parses as
    loose tokens: the scan starts at the last whole statement before them)."""
    if snapshot.tree is None:
        return 0
    start = 0
    for child in snapshot.tree.root_node.children:
        if child.start_byte > offset:
            break
        if child.type.endswith(("statement", "declaration")):  # not a loose token of a half-typed one
            start = child.start_byte
    return start


def _items(snapshot: Snapshot, context: Context, edit_range: types.Range, snippets: bool) -> list[types.CompletionItem]:
    caps = snapshot.project.capabilities

    def item(label: str, kind: types.CompletionItemKind, detail: str | None = None,
             doc: str | None = None) -> types.CompletionItem:
        return types.CompletionItem(
            label=label, kind=kind, detail=detail,
            documentation=types.MarkupContent(types.MarkupKind.Markdown, doc) if doc else None,
            text_edit=types.TextEdit(edit_range, label),
        )

    if context.slot == "model" and context.params is not None:  # a child's model: provider/id, no aliases
        models = sorted(caps.models or caps.resolvable_models)
        return [item(model, types.CompletionItemKind.Value, "model") for model in models]
    if context.slot == "agent":
        return _agent_items(snapshot, item)
    if context.slot == "value" and context.params is not None and context.key is not None:
        param = context.params.keys[context.key]
        return [item(value, types.CompletionItemKind.EnumMember, f"{context.params.title} {context.key}",
                     param_markdown(context.params, context.key)) for value in param.values]
    if context.slot == "param" and context.params is not None:
        params = context.params
        return [item(key, types.CompletionItemKind.Property,
                     params.title + (f" (pi-subagents {param.since}+)" if param.since else ""),
                     param_markdown(params, key)) for key, param in params.keys.items()]
    if context.slot == "member":
        return _global_items([g for name, g in SUBAGENT_GLOBALS.items() if name.startswith(f"{context.key}.")],
                             item, edit_range, snippets, member=True)
    if context.slot == "model":
        aliases = [item(name, types.CompletionItemKind.Reference, f"alias → {target}")
                   for name, target in sorted(caps.model_aliases.items())]
        models = sorted(caps.models or caps.resolvable_models)
        return aliases + [item(model, types.CompletionItemKind.Value, "model") for model in models]
    if context.slot == "role":
        roles = []
        for name in sorted(caps.agent_types):
            role = snapshot.project.role(name)
            roles.append(item(name, types.CompletionItemKind.Class, role[0].description if role else None))
        return roles
    if context.slot == "tool":
        return [item(tool, types.CompletionItemKind.Function, "tool") for tool in sorted(caps.tools)]
    if context.slot == "thinking":
        return [item(level, types.CompletionItemKind.EnumMember, THINKING_DOCS[level]) for level in THINKING_LEVELS]
    if context.slot == "option" and context.owner is not None:
        owner = context.owner
        return [item(key, types.CompletionItemKind.Property, owner.title, option_markdown(owner, key))
                for key in owner.keys]
    if snapshot.dialect == SUBAGENTS:
        return _global_items([g for g in SUBAGENT_GLOBALS.values() if g.name.startswith(context.prefix)],
                             item, edit_range, snippets, member=False)
    found = []
    for name, primitive in PRIMITIVES.items():
        if not name.startswith(context.prefix):
            continue
        completion = item(name, types.CompletionItemKind.Snippet if snippets else types.CompletionItemKind.Function,
                          primitive.signature, primitive_markdown(primitive))
        if snippets:
            completion.text_edit = types.TextEdit(edit_range, primitive.snippet)
            completion.insert_text_format = types.InsertTextFormat.Snippet
        found.append(completion)
    return found


Item = Callable[..., types.CompletionItem]


def _agent_items(snapshot: Snapshot, item: Item) -> list[types.CompletionItem]:
    """The enabled agent definitions, with what each is, its model and tools."""
    catalog = snapshot.project.capabilities.agent_catalog
    if catalog is None:
        return []
    found = []
    for name in sorted(catalog.names):
        agent = catalog.get(name)
        if agent is not None:
            found.append(item(name, types.CompletionItemKind.Class, agent.description, agent_markdown(agent)))
    return found


def _global_items(globals_: list[Global], item: Item, edit_range: types.Range, snippets: bool, *,
                  member: bool) -> list[types.CompletionItem]:
    """`runs.*`/`state.*`/`emit` items: after `runs.` the method names, elsewhere the whole call."""
    found = []
    for entry in globals_:
        label = entry.name.split(".", 1)[1] if member else entry.name
        completion = item(label, types.CompletionItemKind.Method if member else types.CompletionItemKind.Function,
                          entry.signature, global_markdown(entry))
        if snippets:
            snippet = entry.snippet.removeprefix("await ")
            snippet = snippet.split(".", 1)[1] if member and "." in snippet.split("(", 1)[0] else snippet
            completion.text_edit = types.TextEdit(edit_range, snippet)
            completion.insert_text_format = types.InsertTextFormat.Snippet
            completion.kind = types.CompletionItemKind.Snippet
        found.append(completion)
    return found


def complete(snapshot: Snapshot, position: types.Position, snippets: bool) -> types.CompletionList | None:
    offset = snapshot.offset(position)
    index = snapshot.index
    text = snapshot.text
    char_offset = index.byte_to_char(offset)
    context = completion_context(text, index.byte_to_char(_statement_start(snapshot, offset)), char_offset)
    if context is None:
        return None
    edit_range = snapshot.range(index.char_to_byte(context.prefix_start), offset)
    return types.CompletionList(is_incomplete=False, items=_items(snapshot, context, edit_range, snippets))


class Completion(LanguageFeature):
    def register(self) -> None:
        options = types.CompletionOptions(trigger_characters=['"', "'", ":", "/", "{", ","])
        self.server.feature(types.TEXT_DOCUMENT_COMPLETION, options)(handler(self._complete))

    async def _complete(self, params: types.CompletionParams) -> types.CompletionList | None:
        snapshot = await self.server.get_feature(DocumentTable).current(params.text_document.uri)
        if snapshot is None or snapshot.kind is not DocumentKind.SCRIPT:
            return None
        snippets = self.server.client_supports("text_document.completion.completion_item.snippet_support")
        return await self.server.run_in_thread(complete, snapshot, params.position, snippets)
