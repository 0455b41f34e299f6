"""Journal keys: the structural paths that identify every operation across replays (spec G.2)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from urllib.parse import quote

from piflow.errors import WorkflowError

_SAFE = "-_.!~*'()"


@lru_cache(maxsize=65536)
def encode_component(part: str) -> str:
    """JavaScript `encodeURIComponent` (on the UTF-8 bytes, as the reference does)."""
    return quote(part, safe=_SAFE)


def structural_path(*parts: str) -> str:
    """`P(a, b, ...)`: encoded, non-blank parts joined by `/`."""
    if not parts or any(not part.strip() for part in parts):
        raise WorkflowError("INVALID_METADATA", "Structural paths require non-empty explicit names")
    return "/".join(encode_component(part) for part in parts)


def agent_path(path: Sequence[str], call_site: str, occurrence: int) -> str:
    return structural_path("agent", *path, f"callsite:{call_site}", f"occurrence:{occurrence}")


def conversation_id(name: str, path: Sequence[str], call_site: str, occurrence: int) -> str:
    return structural_path("conversation", name, *path, f"callsite:{call_site}", f"occurrence:{occurrence}")


def turn_path(conversation: str, turn: int) -> str:
    return structural_path(conversation, f"turn:{turn}")


def checkpoint_path(label: str) -> str:
    return structural_path("checkpoint", label)


def function_path(path: Sequence[str], name: str, occurrence: int) -> str:
    return structural_path("function", *path, name, str(occurrence))


def decision_path(proposal_id: str) -> str:
    return f"decision/{proposal_id}"
