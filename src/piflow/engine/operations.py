"""The one "has this happened?" primitive: every replayable step checks and records through here.

Agents, conversation turns, extension function calls and checkpoint answers are keyed by their
structural journal path (spec G.2). `check` returns the recorded outcome (replay, spec G.3) or
None (run it); `record` journals the outcome inside the transaction of the step's effect, as
DBOS's `check_operation_execution` does. The owner's lease makes it the only writer of its run's
operations, so checks are answered from memory; the one outcome written by other processes, a
checkpoint answer, is re-read with `refresh`. Memory follows commits only: an outcome whose
transaction rolled back is never replayed.
"""

from __future__ import annotations

import json
from typing import Any, Final

from piflow.engine.journal import OperationKind
from piflow.engine.store import RunStore
from piflow.errors import WorkflowError

_UNDECODED: Final = object()


class Outcome:
    """The recorded value of a completed operation (a box, so a recorded `None` is not "not yet").

    An outcome read from the store keeps its JSON `text` and decodes it on first use: a resume
    hands thousands of journaled agent results to the worker as text, never decoding them.
    """

    __slots__ = ("_value", "text")

    def __init__(self, value: Any = _UNDECODED, text: str | None = None) -> None:
        self._value = value
        self.text = text

    @property
    def value(self) -> Any:
        if self._value is _UNDECODED:
            self._value = json.loads(self.text or "null")
        return self._value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Outcome) and self.value == other.value

    def __repr__(self) -> str:
        return f"Outcome({self.value!r})"


class Operations:
    """The journaled operations of one run, as its owner sees them."""

    def __init__(self, store: RunStore, run_id: str) -> None:
        self._store = store
        self._run_id = run_id
        self._entries: dict[str, tuple[str | None, Outcome]] = {
            path: (kind, Outcome(text=text)) for path, (kind, text) in store.operation_texts(run_id).items()
        }
        self._uncommitted: dict[str, tuple[str | None, Outcome]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def check(self, kind: OperationKind, path: str) -> Outcome | None:
        """The outcome recorded at `path`, or None when the operation has not completed.

        An outcome recorded by another kind of operation means the script no longer matches its
        journal: `RESUME_INCOMPATIBLE`, never the other operation's value.
        """
        entry = self._entries.get(path)
        if entry is None:
            return None
        recorded, outcome = entry
        if recorded is not None and recorded != kind:
            raise WorkflowError(
                "RESUME_INCOMPATIBLE",
                f"Journal entry {path} was recorded by a {recorded} operation, not by a {kind}",
            )
        return outcome

    def record(self, kind: OperationKind, path: str, value: Any) -> None:
        """Journal `value` at `path` in the caller's open transaction (`DUPLICATE_NAME` if recorded).

        `check` sees it once that transaction commits (`committed`).
        """
        self.check(kind, path)
        self._store.journal_put(self._run_id, path, value, kind)
        self._uncommitted[path] = (kind, Outcome(value))

    def refresh(self, kind: OperationKind, path: str) -> Outcome | None:
        """`check` after re-reading `path` from the store: for outcomes another process records."""
        entry = self._store.operation(self._run_id, path)
        if entry is not None:
            self._entries[path] = (entry[0], Outcome(entry[1]))
        return self.check(kind, path)

    def committed(self) -> None:
        """The transaction holding the recorded outcomes committed: replay them from now on."""
        if self._uncommitted:
            self._entries.update(self._uncommitted)
            self._uncommitted.clear()

    def rolled_back(self) -> None:
        """The transaction holding the recorded outcomes failed: they did not happen."""
        self._uncommitted.clear()
