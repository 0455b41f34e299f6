"""Journal keys: the structural paths that identify every operation across replays (spec G.2)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum
from functools import lru_cache
from typing import Final
from urllib.parse import quote, unquote

from piflow.errors import WorkflowError

_SAFE = "-_.!~*'()"


class OperationKind(StrEnum):
    """What recorded a journal entry: every replayable step is one of these (spec G.2)."""

    AGENT = "agent"
    TURN = "turn"
    FUNCTION = "function"
    CHECKPOINT = "checkpoint"
    HOST = "host"
    CHILD = "child"
    EMIT = "emit"
    STATE = "state"
    STEER = "steer"

_CALL_SITE: Final = re.compile(r"callsite%3A(\d+)%3A(\d+)")


_PLAIN: Final = re.compile(r"[A-Za-z0-9_.:-]*")
"""A component `encodeURIComponent` changes at most by escaping `:` (call sites, occurrences, most names)."""


@lru_cache(maxsize=65536)
def encode_component(part: str) -> str:
    """JavaScript `encodeURIComponent` (on the UTF-8 bytes, as the reference does)."""
    if _PLAIN.fullmatch(part):  # a 10,000-agent replay encodes 10,000 distinct call sites
        return part.replace(":", "%3A")
    return quote(part, safe=_SAFE)


def structural_path(*parts: str) -> str:
    """`P(a, b, ...)`: encoded, non-blank parts joined by `/`."""
    if not parts or not all(map(str.strip, parts)):
        raise WorkflowError("INVALID_METADATA", "Structural paths require non-empty explicit names")
    return "/".join(map(encode_component, parts))


def agent_path(path: Sequence[str], call_site: str, occurrence: int) -> str:
    return structural_path("agent", *path, f"callsite:{call_site}", f"occurrence:{occurrence}")


def call_site_of(journal_path: str) -> tuple[int, int] | None:
    """The call site `(start, end)` (UTF-16 offsets into the launched body, spec A.3) that an agent's
    or a conversation turn's journal path names; None for other paths.

    The last `callsite:` component is the call's own (a parallel task may be named like one).
    """
    for part in reversed(journal_path.split("/")):
        match = _CALL_SITE.fullmatch(part)
        if match is not None:
            return int(match.group(1)), int(match.group(2))
    return None


def workflow_key_of(journal_path: str) -> str | None:
    """The workflow key a pi-subagents child's journal path names (`child_path`); None for other paths.

    Children have no call site in their path (their key is their identity, spec A.3): an editor
    finds the call by the key, which survives edits that move the call.
    """
    kind, _, key = journal_path.partition("/")
    return unquote(key) if kind == "child" and key and "/" not in key else None


def conversation_id(name: str, path: Sequence[str], call_site: str, occurrence: int) -> str:
    return structural_path("conversation", name, *path, f"callsite:{call_site}", f"occurrence:{occurrence}")


def conversation_name(conversation: str) -> str:
    """The script's name of a conversation, from its id (`conversation_id`)."""
    return unquote(conversation.split("/")[1])


def turn_path(conversation: str, turn: int) -> str:
    return structural_path(conversation, f"turn:{turn}")


def checkpoint_path(label: str) -> str:
    return structural_path("checkpoint", label)


def function_path(path: Sequence[str], name: str, occurrence: int) -> str:
    return structural_path("function", *path, name, str(occurrence))


def host_path(key: str) -> str:
    """A pi-subagents `runs.host` step: its workflow key is its identity (spec A.3)."""
    return structural_path("host", key)


def child_path(key: str) -> str:
    """A pi-subagents child: its workflow key is its identity (spec A.3), as for host steps."""
    return structural_path("child", key)


def decision_path(proposal_id: str) -> str:
    return f"decision/{proposal_id}"
