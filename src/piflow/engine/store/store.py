"""The durable run store: runs, journal, agents, checkpoints, decisions, events, worktrees, leases.

One SQLite database per project, shared by every piflow process of that project (the LSP
server, `piflow run`, `piflow approve`, ...). Design:

- **One short transaction per state change.** Every write method is atomic on its own; a
  `batch()` groups many of them into one transaction (the engine's hot path, and how a result
  and its journal entry commit together). Write transactions start with `BEGIN IMMEDIATE`, so
  a transaction never has to upgrade a read lock and lose to another writer half-way.
- **WAL**: readers never block the writer nor the writer them; a reader in another process
  sees each transaction whole or not at all. Writers queue behind `busy_timeout`.
- **`synchronous=NORMAL`**: a commit is durable once `COMMIT` returns as far as the *process*
  is concerned (a `kill -9` loses nothing committed: the WAL is in the OS page cache). A power
  loss or OS crash may roll back the last few transactions (never corrupt the database);
  `FULL` would fsync every commit, which costs far more than the engine's whole write path.
- **Errors**: SQLite errors (disk full, I/O, busy past the timeout, corruption) become
  `WorkflowError("INTERNAL_ERROR", ...)` naming the store and the cause, after the
  transaction is rolled back, so no partial state is ever committed.

A `RunStore` may be shared between threads (calls are serialised by a lock), but a batch
belongs to the thread that opened it and must not span an `await`: other coroutines on the
same thread would silently join it.
"""

from __future__ import annotations

import sqlite3
import stat
import threading
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from piflow.engine.events import BUDGET_EVENT
from piflow.engine.journal import OperationKind, checkpoint_path
from piflow.engine.lifecycle import CheckpointState, DecisionState
from piflow.engine.store.location import create_private_file
from piflow.engine.store.process import host_name, process_alive, process_start
from piflow.engine.store.records import (
    AGENT_STATES,
    RUN_STATES,
    AgentRecord,
    AttemptRecord,
    CheckpointRecord,
    DamagedRecord,
    DecisionRecord,
    EventRecord,
    RunRecord,
    StoreError,
    WorktreeRecord,
    check_state,
)
from piflow.engine.store.schema import check_piflow_store, migrate
from piflow.engine.store.tables import (
    AGENTS,
    ATTEMPTS,
    CHECKPOINTS,
    DECISIONS,
    EVENTS,
    RUNS,
    WORKTREES,
    Table,
    decode_optional,
    encode_json,
    encode_optional,
)
from piflow.errors import WorkflowError

_RUN_UPDATABLE: Final = frozenset(
    {"state", "phase", "error", "budget", "budget_version", "usage", "result", "warnings", "updated_at"}
)
_AGENT_UPDATABLE: Final = frozenset(AGENTS.columns) - {"id", "run_id", "n", "created_at"}
_NO_LIMIT: Final = -1
_IDS_PER_QUERY: Final = 500
"""Agent ids per `IN (...)` query: well under SQLite's bound on parameters."""
MIN_RUN_PREFIX: Final = 8
"""A run id prefix shorter than this names no run (ids are uuids: 8 hex digits rarely collide)."""
_JOURNAL_INSERT: Final = (
    "INSERT INTO journal (run_id, path, value, kind) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
_LEASE_COLUMNS: Final = "owner_token, pid, host, pid_start, heartbeat_at"

Subject = tuple[str, str]
"""What a failed foreign key means: ("run", id) or ("agent", id)."""


def _unknown(subject: Subject) -> WorkflowError:
    kind, identifier = subject
    return WorkflowError("RESUME_INCOMPATIBLE", f"Unknown workflow {kind}: {identifier}")


class RunStore:
    """The run store of one project; open it with `RunStore.open(path)`."""

    def __init__(self, connection: sqlite3.Connection, location: str) -> None:
        """Wrap an open, configured and migrated connection (use `RunStore.open`)."""
        self._connection = connection
        self._location = location
        self._lock = threading.RLock()
        self._depth = 0
        # Set when SQLite rolled back the whole transaction under an open batch (it does so on
        # some I/O and disk-full errors): every later call in that batch must fail too, or it
        # would run in autocommit mode and commit half a batch.
        self._doomed = False

    # -- lifecycle ---------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, *, busy_timeout: float = 10.0) -> RunStore:
        """Open (creating and migrating as needed) the store at `path`.

        A path that is not a regular file, or a database that is not piflow's, is refused
        before SQLite writes anything to it (`check_piflow_store`).
        """
        location = Path(path)
        try:
            create_private_file(location)
            mode = location.stat().st_mode
        except OSError as exc:
            raise StoreError(f"Cannot create the run store {location}: {exc}") from exc
        if not stat.S_ISREG(mode):
            raise WorkflowError(
                "CONFIG_ERROR",
                f"Run store {location} is not a regular file; set [piflow] store in piflow.toml to a file path",
            )
        try:
            connection = sqlite3.connect(
                location,
                timeout=busy_timeout,
                isolation_level=None,
                check_same_thread=False,
                cached_statements=256,
            )
        except sqlite3.Error as exc:
            raise _store_error(str(location), exc) from exc
        try:
            check_piflow_store(connection, str(location))
            journal = connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(journal).lower() != "wal":
                raise WorkflowError(
                    "INTERNAL_ERROR",
                    f"Run store {location} cannot use write-ahead logging (journal mode {journal}); "
                    "configure a store path on a local file system",
                )
            connection.execute("PRAGMA synchronous = NORMAL")
            connection.execute("PRAGMA foreign_keys = ON")
            migrate(connection, str(location))
        except sqlite3.Error as exc:
            connection.close()
            raise _store_error(str(location), exc) from exc
        except BaseException:
            connection.close()
            raise
        return cls(connection, str(location))

    @property
    def location(self) -> Path:
        """The database file; run directories (worktrees) live beside it."""
        return Path(self._location)

    def run_dir(self, run_id: str) -> Path:
        """The run's own directory (worktrees, worker log, transcripts): `<store dir>/runs/<runId>`."""
        return self.location.parent / "runs" / run_id

    def own_paths(self) -> list[Path]:
        """Every file and directory of the store: what a snapshot of a repository holding it leaves out."""
        return [self.location.with_name(self.location.name + suffix) for suffix in ("", "-wal", "-shm", "-journal")] + [
            self.location.parent / "runs"
        ]

    def close(self) -> None:
        """Close the connection; an open batch is rolled back by SQLite."""
        with self._lock:
            self._connection.close()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- transactions ------------------------------------------------------------------------
    @contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction for every store call inside; all of them commit or none does.

        A nested batch joins the outer transaction through a savepoint: an exception leaving
        the inner block undoes the inner block's writes only, and the outer batch may go on.
        """
        with self._write(savepoint=True):
            yield

    @contextmanager
    def consistent_read(self) -> Iterator[None]:
        """Every read inside sees the store as of one moment: a view built from several queries.

        Without it each query sees the latest commit, so a view read while an owner commits may
        mix two moments (a pending checkpoint on a run still `running`; a finished run whose
        lease is gone read as `interrupted`). Reads only: a write inside is a programming error.
        Inside a batch (or another consistent read) it joins that transaction.
        """
        with self._lock:
            connection = self._connection
            if self._depth or connection.in_transaction:
                yield
                return
            try:
                connection.execute("BEGIN")
            except sqlite3.Error as exc:
                raise self._error(exc) from exc
            try:
                yield
            finally:
                with suppress(sqlite3.Error):  # nothing to keep: a read transaction only ends
                    connection.execute("ROLLBACK")

    @contextmanager
    def _write(
        self, *, savepoint: bool = False, subject: Subject | None = None
    ) -> Iterator[sqlite3.Connection]:
        """A write transaction, or a part of the enclosing one.

        `savepoint` makes a multi-statement method atomic inside a batch too (single
        statements are atomic by themselves). `subject` names what a foreign-key failure means.
        """
        with self._lock:
            if self._doomed:
                raise self._doomed_error()
            connection = self._connection
            depth = self._depth
            name = f"nested{depth}" if depth and savepoint else None
            try:
                if depth == 0:
                    connection.execute("BEGIN IMMEDIATE")
                elif name is not None:
                    connection.execute(f"SAVEPOINT {name}")
            except sqlite3.Error as exc:
                raise self._error(exc) from exc
            self._depth = depth + 1
            try:
                yield connection
            except BaseException as exc:
                self._depth = depth
                self._undo(depth, name)
                if isinstance(exc, sqlite3.Error):
                    raise self._error(exc, subject) from exc
                raise
            self._depth = depth
            try:
                if depth == 0:
                    if self._doomed:
                        self._doomed = False
                        raise self._doomed_error()
                    connection.execute("COMMIT")
                elif name is not None:
                    connection.execute(f"RELEASE {name}")
            except sqlite3.Error as exc:
                self._undo(depth, name)
                raise self._error(exc) from exc

    def _doomed_error(self) -> StoreError:
        return StoreError(f"Run store {self._location}: the batch was rolled back by an earlier error")

    def _undo(self, depth: int, name: str | None) -> None:
        """Roll back what the failed scope at `depth` did, as far as SQLite left it to us."""
        connection = self._connection
        if depth == 0:
            self._doomed = False
            if connection.in_transaction:
                # The original error is the one to report; SQLite rolls back on close anyway.
                with suppress(sqlite3.Error):
                    connection.execute("ROLLBACK")
        elif not connection.in_transaction:
            self._doomed = True
        elif name is not None:
            try:
                connection.execute(f"ROLLBACK TO {name}")
                connection.execute(f"RELEASE {name}")
            except sqlite3.Error:
                self._doomed = True

    @contextmanager
    def _read(self, subject: Subject | None = None) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._connection
            except sqlite3.Error as exc:
                raise self._error(exc, subject) from exc

    def _execute(self, sql: str, params: Sequence[Any], subject: Subject | None = None) -> sqlite3.Cursor:
        """Run one write statement: in its own transaction, or straight inside the open batch.

        A single statement is atomic by itself, so inside a batch it needs no savepoint; this
        is the engine's hot path and skips the transaction machinery.
        """
        with self._lock:
            if not self._depth:
                with self._write(subject=subject) as connection:
                    return connection.execute(sql, params)
            if self._doomed:
                raise self._doomed_error()
            try:
                return self._connection.execute(sql, params)
            except sqlite3.Error as exc:
                if not self._connection.in_transaction:
                    self._doomed = True
                raise self._error(exc, subject) from exc

    def _error(self, exc: sqlite3.Error, subject: Subject | None = None) -> WorkflowError:
        foreign_key = getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
        if subject is not None and foreign_key:
            return _unknown(subject)
        return _store_error(self._location, exc)

    def _require(self, connection: sqlite3.Connection, subject: Subject) -> None:
        """Raise the unknown-run/agent error unless the row exists (called only on empty results)."""
        kind, identifier = subject
        table = "runs" if kind == "run" else "agents"
        if connection.execute(f"SELECT 1 FROM {table} WHERE id = ?", (identifier,)).fetchone() is None:
            raise _unknown(subject)

    # -- runs --------------------------------------------------------------------------------
    def create_run(self, record: RunRecord, script: str, snapshot: dict[str, Any]) -> None:
        """Store a new run with its exact launched source and its launch snapshot."""
        with self._write(savepoint=True) as connection:
            if connection.execute(RUNS.insert_or_keep, RUNS.row(record)).rowcount == 0:
                raise WorkflowError("DUPLICATE_NAME", f"Workflow run already exists: {record.id}")
            connection.execute(
                "INSERT INTO launches (run_id, script, snapshot) VALUES (?, ?, ?)",
                (record.id, script, encode_json(snapshot)),
            )

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._read() as connection:
            row = connection.execute(f"{RUNS.select} WHERE id = ?", (run_id,)).fetchone()
        return None if row is None else RUNS.decode(row)

    def resolve_run_id(self, prefix: str) -> str:
        """The run id `prefix` names: an exact id, or a unique prefix of at least 8 characters."""
        if len(prefix) < MIN_RUN_PREFIX and self.get_run(prefix) is None:
            raise WorkflowError(
                "RESUME_INCOMPATIBLE",
                f"Unknown workflow run: {prefix} (a run id prefix needs at least 8 characters)",
            )
        rows = self.match_run_ids(prefix)
        if not rows:
            raise WorkflowError("RESUME_INCOMPATIBLE", f"Unknown workflow run: {prefix}")
        if len(rows) > 1:
            matches = ", ".join(rows[:3]) + (", ..." if len(rows) > 3 else "")
            raise WorkflowError(
                "RESUME_INCOMPATIBLE", f"Ambiguous workflow run id prefix {prefix}: matches {matches}"
            )
        return rows[0]

    def match_run_ids(self, prefix: str, limit: int = 4) -> list[str]:
        """Ids of the runs `prefix` may name (the exact id alone when one matches), at most `limit`.

        Commands that are not `workflow_resume` word an unknown run their own way, so they ask this
        instead of catching `resolve_run_id`'s spec error.
        """
        with self._read() as connection:
            if connection.execute("SELECT 1 FROM runs WHERE id = ?", (prefix,)).fetchone() is not None:
                return [prefix]
            rows = connection.execute(
                "SELECT id FROM runs WHERE substr(id, 1, ?) = ? ORDER BY id LIMIT ?", (len(prefix), prefix, limit)
            ).fetchall()
        return [row[0] for row in rows]

    def list_runs(
        self, cwd: str | None = None, script_path: str | None = None, *, damaged: list[DamagedRecord] | None = None
    ) -> list[RunRecord]:
        """Runs, newest first, optionally only those launched in `cwd` and/or from `script_path`.

        A run whose row cannot be read is left out (and added to `damaged` when given), so one
        damaged row never hides the others.
        """
        clauses: list[str] = []
        params: list[Any] = []
        if cwd is not None:
            clauses.append("cwd = ?")
            params.append(cwd)
        if script_path is not None:
            clauses.append("script_path = ?")
            params.append(script_path)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._read() as connection:
            rows = connection.execute(
                f"{RUNS.select}{where} ORDER BY created_at DESC, rowid DESC", params
            ).fetchall()
        records: list[RunRecord] = []
        for row in rows:
            try:
                records.append(RUNS.decode(row))
            except DamagedRecord as exc:
                if damaged is not None:
                    damaged.append(exc)
        return records

    def update_run(self, run_id: str, **fields: Any) -> None:
        """Change some of state, phase, error, budget, budget_version, usage, result, warnings.

        `updated_at` is set to now unless given; setting `result` (even to None) records that
        the run has one.
        """
        _check_updatable("Run", fields, _RUN_UPDATABLE)
        if "state" in fields:
            check_state("run", fields["state"], RUN_STATES)
        fields.setdefault("updated_at", time.time())
        if "result" in fields:
            fields["has_result"] = True
        self._update(RUNS, fields, ("run", run_id))

    def _update(self, table: Table[Any], fields: dict[str, Any], subject: Subject) -> None:
        names = tuple(fields)
        params = [table.encode_field(name, value) for name, value in fields.items()]
        params.append(subject[1])
        if self._execute(table.update_sql(names), params).rowcount == 0:
            raise _unknown(subject)

    def run_script(self, run_id: str) -> str:
        """The exact source the run was launched with (meta header included)."""
        script: str = self._launch_column(run_id, "script")
        return script

    def snapshot(self, run_id: str) -> dict[str, Any]:
        """The run's launch snapshot (spec G.1)."""
        snapshot: dict[str, Any] = decode_optional(self._launch_column(run_id, "snapshot"))
        return snapshot

    def _launch_column(self, run_id: str, column: str) -> Any:
        with self._read() as connection:
            row = connection.execute(f"SELECT {column} FROM launches WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise _unknown(("run", run_id))
        return row[0]

    def replace_snapshot(self, run_id: str, snapshot: dict[str, Any]) -> None:
        """Re-save the snapshot (cold resume stores the current aliases and settings path, F.3)."""
        cursor = self._execute(
            "UPDATE launches SET snapshot = ? WHERE run_id = ?", (encode_json(snapshot), run_id)
        )
        if cursor.rowcount == 0:
            raise _unknown(("run", run_id))

    def delete_run(self, run_id: str, owner_token: str | None = None) -> None:
        """Delete the run and everything that belongs to it (worktrees on disk are the caller's).

        With `owner_token`, only while that token holds the run's lease (`RUN_OWNED` otherwise):
        the deleter took the lease first, so no owner can start between its checks and the delete.
        """
        subject = ("run", run_id)
        with self._write(savepoint=True, subject=subject) as connection:
            if owner_token is not None:
                holder = connection.execute(
                    "SELECT owner_token, pid FROM leases WHERE run_id = ?", (run_id,)
                ).fetchone()
                if holder is not None and holder[0] != owner_token:
                    raise _owned(run_id, holder[1])
            if connection.execute("DELETE FROM runs WHERE id = ?", (run_id,)).rowcount == 0:
                raise _unknown(subject)

    # -- journal (spec G.3) ------------------------------------------------------------------
    def journal(self, run_id: str) -> dict[str, Any]:
        """Every completed structural path of the run and its value, in completion order."""
        subject = ("run", run_id)
        with self._read(subject) as connection:
            rows = connection.execute(
                "SELECT path, value FROM journal WHERE run_id = ? ORDER BY rowid", (run_id,)
            ).fetchall()
            if not rows:
                self._require(connection, subject)
        return {path: decode_optional(value) for path, value in rows}

    def journal_texts(self, run_id: str, paths: Collection[str], cap: int | None = None) -> dict[str, tuple[str, int]]:
        """`path -> (stored JSON text, its length)` for the journaled ones of `paths`.

        With `cap`, only the first `cap` characters of each text are read: views show previews of
        outputs that may be megabytes without paging them in. The text is ASCII (see `encode_json`),
        so its length is its size in bytes.
        """
        wanted = set(paths)
        if not wanted:
            return {}
        with self._read(("run", run_id)) as connection:
            text = "value" if cap is None else f"substr(value, 1, {int(cap)})"
            rows = connection.execute(
                f"SELECT path, {text}, length(value) FROM journal WHERE run_id = ?", (run_id,)
            ).fetchall()
        return {path: (text, size) for path, text, size in rows if path in wanted}

    def operations(self, run_id: str) -> dict[str, tuple[str | None, Any]]:
        """`path -> (kind, value)` of every journaled operation of the run (kind None: recorded before kinds)."""
        return {path: (kind, decode_optional(text)) for path, (kind, text) in self.operation_texts(run_id).items()}

    def operation_texts(self, run_id: str) -> dict[str, tuple[str | None, str]]:
        """`operations` with each value as its stored JSON text: a resume hands thousands of them to
        the worker as they are (`engine/operations.py`)."""
        with self._read(("run", run_id)) as connection:
            rows = connection.execute(
                "SELECT path, kind, value FROM journal WHERE run_id = ? ORDER BY rowid", (run_id,)
            ).fetchall()
        return {path: (kind, value) for path, kind, value in rows}

    def operation(self, run_id: str, path: str) -> tuple[str | None, Any] | None:
        """`(kind, value)` of the operation journaled at `path`, or None (one row, for answers from elsewhere)."""
        with self._read(("run", run_id)) as connection:
            row = connection.execute(
                "SELECT kind, value FROM journal WHERE run_id = ? AND path = ?", (run_id, path)
            ).fetchone()
        return None if row is None else (row[0], decode_optional(row[1]))

    def journal_put(self, run_id: str, path: str, value: Any, kind: str | None = None) -> None:
        """Journal a completed operation; a path is stored once (`DUPLICATE_NAME` otherwise)."""
        cursor = self._execute(_JOURNAL_INSERT, (run_id, path, encode_json(value), kind), ("run", run_id))
        if cursor.rowcount == 0:
            raise _duplicate_path(path)

    # -- conversation heads (spec J.6) -------------------------------------------------------
    def conversation_head(self, run_id: str, conversation: str) -> tuple[int, dict[str, Any]] | None:
        """`(turn, backend state)` saved after the conversation's last successful turn, or None."""
        with self._read(("run", run_id)) as connection:
            row = connection.execute(
                "SELECT turn, state FROM conversations WHERE run_id = ? AND conversation = ?", (run_id, conversation)
            ).fetchone()
        return None if row is None else (int(row[0]), decode_optional(row[1]))

    def put_conversation_head(self, run_id: str, conversation: str, turn: int, state: dict[str, Any]) -> None:
        """Make `state` the conversation's head at `turn` (in the transaction journaling that turn)."""
        self._execute(
            "INSERT INTO conversations (run_id, conversation, turn, state) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (run_id, conversation) DO UPDATE SET turn = excluded.turn, state = excluded.state",
            (run_id, conversation, turn, encode_json(state)),
            ("run", run_id),
        )

    # -- agents and attempts -----------------------------------------------------------------
    def next_agent_number(self, run_id: str) -> int:
        """One more than the run's highest agent number (1 for the first agent).

        It reserves nothing: the run's owner keeps the counter and calls this to restore it.
        """
        subject = ("run", run_id)
        with self._read(subject) as connection:
            highest = connection.execute("SELECT max(n) FROM agents WHERE run_id = ?", (run_id,)).fetchone()[
                0
            ]
            if highest is None:
                self._require(connection, subject)
                return 1
        return int(highest) + 1

    def put_agent(self, record: AgentRecord) -> None:
        """Insert the agent, or replace every field of the agent with the same id."""
        self._execute(AGENTS.upsert, AGENTS.row(record), ("run", record.run_id))

    def update_agent(self, agent_id: str, **fields: Any) -> None:
        """Change some fields of an agent; `updated_at` is set to now unless given."""
        _check_updatable("Agent", fields, _AGENT_UPDATABLE)
        if "state" in fields:
            check_state("agent", fields["state"], AGENT_STATES)
        fields.setdefault("updated_at", time.time())
        self._update(AGENTS, fields, ("agent", agent_id))

    def cancel_unsettled_agents(self, run_id: str, error: dict[str, Any]) -> list[AgentRecord]:
        """Settle as `cancelled` (with `error`) every agent of the run that is not settled; the records as
        they were. For agents a dead owner left behind: no process runs them any more (spec F.3)."""
        unsettled = "run_id = ? AND state NOT IN ('completed', 'failed', 'cancelled')"
        with self._write(savepoint=True, subject=("run", run_id)) as connection:
            rows = connection.execute(f"{AGENTS.select} WHERE {unsettled} ORDER BY n", (run_id,)).fetchall()
            if rows:
                connection.execute(
                    "UPDATE agents SET state = 'cancelled', activity = NULL, error = ?, updated_at = ? "
                    f"WHERE {unsettled}",
                    (AGENTS.encode_field("error", error), time.time(), run_id),
                )
        return [AGENTS.decode(row) for row in rows]

    def agents(self, run_id: str) -> list[AgentRecord]:
        """The run's agents in creation (`n`) order."""
        subject = ("run", run_id)
        with self._read(subject) as connection:
            rows = connection.execute(f"{AGENTS.select} WHERE run_id = ? ORDER BY n", (run_id,)).fetchall()
            if not rows:
                self._require(connection, subject)
        return [AGENTS.decode(row) for row in rows]

    def agents_changing(self, run_id: str, ids: Collection[str]) -> list[AgentRecord]:
        """The run's agents in `ids` and those still running (whose tokens and activity change without
        an event), in `n` order: what a progress delta reads instead of the whole run."""
        wanted = sorted(set(ids))
        rows: list[Any] = []
        with self._read(("run", run_id)) as connection:
            rows += connection.execute(
                f"{AGENTS.select} WHERE run_id = ? AND state = 'running'", (run_id,)
            ).fetchall()
            for start in range(0, len(wanted), _IDS_PER_QUERY):
                chunk = wanted[start : start + _IDS_PER_QUERY]
                marks = ",".join("?" * len(chunk))
                rows += connection.execute(  # `+run_id`: found by their ids, not among all the run's agents
                    f"{AGENTS.select} WHERE +run_id = ? AND state != 'running' AND id IN ({marks})", (run_id, *chunk)
                ).fetchall()
        return sorted((AGENTS.decode(row) for row in rows), key=lambda agent: agent.n)

    def agent_counts(self, run_id: str, settled: Collection[str]) -> tuple[int, int]:
        """`(total, settled)`: how many agents the run has, and how many are in a `settled` state."""
        marks = ",".join("?" * len(settled))
        with self._read(("run", run_id)) as connection:
            row = connection.execute(
                f"SELECT count(*), coalesce(sum(state IN ({marks})), 0) FROM agents WHERE run_id = ?",
                (*settled, run_id),
            ).fetchone()
        return int(row[0]), int(row[1])

    def put_attempt(self, record: AttemptRecord) -> None:
        """Insert an attempt or replace it (an attempt is written when it starts and when it ends)."""
        self._execute(ATTEMPTS.upsert, ATTEMPTS.row(record), ("agent", record.agent_id))

    def attempts(self, agent_id: str) -> list[AttemptRecord]:
        subject = ("agent", agent_id)
        with self._read(subject) as connection:
            rows = connection.execute(
                f"{ATTEMPTS.select} WHERE agent_id = ? ORDER BY attempt", (agent_id,)
            ).fetchall()
            if not rows:
                self._require(connection, subject)
        return [ATTEMPTS.decode(row) for row in rows]

    def run_attempts(self, run_id: str) -> dict[str, list[AttemptRecord]]:
        """Every attempt of the run's agents, by agent id, in attempt order (one query for a view)."""
        with self._read(("run", run_id)) as connection:
            rows = connection.execute(
                f"{ATTEMPTS.select} WHERE agent_id IN (SELECT id FROM agents WHERE run_id = ?) "
                "ORDER BY agent_id, attempt",
                (run_id,),
            ).fetchall()
        found: dict[str, list[AttemptRecord]] = {}
        for row in rows:
            record = ATTEMPTS.decode(row)
            found.setdefault(record.agent_id, []).append(record)
        return found

    # -- checkpoints (spec F.4) --------------------------------------------------------------
    def await_checkpoint(self, run_id: str, label: str, prompt: str, context: Any) -> bool:
        """Record that the run awaits `label`; False (and the first record kept) if already known."""
        record = CheckpointRecord(run_id, label, prompt, context, CheckpointState.AWAITING, time.time())
        return bool(
            self._execute(CHECKPOINTS.insert_or_keep, CHECKPOINTS.row(record), ("run", run_id)).rowcount
        )

    def answer_checkpoint(self, run_id: str, label: str, approved: bool) -> bool:
        """Answer an awaiting checkpoint; the first answer wins (False for any later one).

        The answer is journaled at `checkpoint/<label>` in the same transaction, so a resumed
        run replays exactly the answer that was recorded.
        """
        path = checkpoint_path(label)
        subject = ("run", run_id)
        with self._write(savepoint=True, subject=subject) as connection:
            cursor = connection.execute(
                "UPDATE checkpoints SET state = ?, answered_at = ? "
                "WHERE run_id = ? AND label = ? AND state = 'awaiting'",
                (CheckpointState.APPROVED if approved else CheckpointState.REJECTED, time.time(), run_id, label),
            )
            if cursor.rowcount == 0:
                self._require(connection, subject)
                return False
            value = encode_json(bool(approved))
            if connection.execute(_JOURNAL_INSERT, (run_id, path, value, OperationKind.CHECKPOINT)).rowcount == 0:
                raise _duplicate_path(path)
            return True

    def checkpoints(self, run_id: str) -> list[CheckpointRecord]:
        """All checkpoints of the run, in the order they were first awaited."""
        return self._checkpoints(run_id, "")

    def awaiting_checkpoints(self, run_id: str) -> list[CheckpointRecord]:
        return self._checkpoints(run_id, " AND state = 'awaiting'")

    def _checkpoints(self, run_id: str, condition: str) -> list[CheckpointRecord]:
        subject = ("run", run_id)
        with self._read(subject) as connection:
            rows = connection.execute(
                f"{CHECKPOINTS.select} WHERE run_id = ?{condition} ORDER BY rowid", (run_id,)
            ).fetchall()
            if not rows:
                self._require(connection, subject)
        return [CHECKPOINTS.decode(row) for row in rows]

    # -- budget decisions (spec H) -----------------------------------------------------------
    def put_decision(self, record: DecisionRecord) -> bool:
        """Store a proposal; False (and the first record kept) if its id is already stored."""
        return bool(
            self._execute(DECISIONS.insert_or_keep, DECISIONS.row(record), ("run", record.run_id)).rowcount
        )

    def answer_decision(self, run_id: str, proposal_id: str, approved: bool) -> bool:
        """Answer a pending proposal; the first answer wins (False for any later one)."""
        subject = ("run", run_id)
        with self._write(subject=subject) as connection:
            cursor = connection.execute(
                "UPDATE decisions SET state = ?, answered_at = ? "
                "WHERE run_id = ? AND proposal_id = ? AND state = ?",
                (DecisionState.APPROVED if approved else DecisionState.REJECTED, time.time(), run_id, proposal_id,
                 DecisionState.PENDING),
            )
            if cursor.rowcount == 0:
                self._require(connection, subject)
                return False
            return True

    def decisions(self, run_id: str) -> list[DecisionRecord]:
        subject = ("run", run_id)
        with self._read(subject) as connection:
            rows = connection.execute(
                f"{DECISIONS.select} WHERE run_id = ? ORDER BY rowid", (run_id,)
            ).fetchall()
            if not rows:
                self._require(connection, subject)
        return [DECISIONS.decode(row) for row in rows]

    # -- events (spec I) ---------------------------------------------------------------------
    def append_event(self, run_id: str, type: str, payload: Any) -> int:
        """Append an event; returns its sequence number (global, strictly increasing).

        Writers are serialised and a sequence number is assigned inside the transaction, so
        commit order is sequence order: a follower never sees a gap filled in later.
        """
        text = encode_optional(payload)
        cursor = self._execute(
            "INSERT INTO events (run_id, type, payload, at) VALUES (?, ?, ?, ?)",
            (run_id, type, text, time.time()),
            ("run", run_id),
        )
        seq = cursor.lastrowid
        assert seq is not None  # set by every INSERT
        return seq

    def events(
        self, run_id: str | None = None, after_seq: int = 0, limit: int | None = None
    ) -> list[EventRecord]:
        """Events after `after_seq` in order, of one run or of all runs.

        This is how a process follows runs another process owns: poll with the last `seq` seen.
        """
        limit_value = _NO_LIMIT if limit is None else limit
        with self._read() as connection:
            if run_id is None:
                rows = connection.execute(
                    f"{EVENTS.select} WHERE seq > ? ORDER BY seq LIMIT ?", (after_seq, limit_value)
                ).fetchall()
            else:
                rows = connection.execute(
                    f"{EVENTS.select} WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                    (run_id, after_seq, limit_value),
                ).fetchall()
                if not rows:
                    self._require(connection, ("run", run_id))
        return [EVENTS.decode(row) for row in rows]

    def events_of_types(self, run_id: str, types: Collection[str]) -> list[EventRecord]:
        """The run's events of the given types, in order (what a view folds, without decoding the rest)."""
        marks = ", ".join("?" * len(types))
        with self._read(("run", run_id)) as connection:
            rows = connection.execute(
                f"{EVENTS.select} WHERE run_id = ? AND type IN ({marks}) ORDER BY seq", (run_id, *types)
            ).fetchall()
        return [EVENTS.decode(row) for row in rows]

    def change_counter(self) -> tuple[int, int]:
        """Changes "anything new?" can be answered from without reading a table: SQLite's
        `data_version` (moves when another connection commits) and this connection's own
        `total_changes`. Cheap enough to poll every few milliseconds (the change feed does)."""
        with self._read() as connection:
            version = connection.execute("PRAGMA data_version").fetchone()[0]
            return int(version), connection.total_changes

    def last_event_seq(self, run_id: str | None = None) -> int:
        """The newest event's `seq` (0 if none): the cheap "anything new?" check for followers."""
        with self._read() as connection:
            if run_id is None:
                row = connection.execute("SELECT max(seq) FROM events").fetchone()
            else:
                row = connection.execute("SELECT max(seq) FROM events WHERE run_id = ?", (run_id,)).fetchone()
        return int(row[0] or 0)

    def add_budget_event(self, run_id: str, event: dict[str, Any]) -> bool:
        """Record a budget event (stored as a `workflow:budget-event` event with `event` as payload).

        Each (budgetVersion, type, proposalId) is recorded once per run; False when it already was.
        """
        try:
            key = encode_json([event["budgetVersion"], event["type"], event.get("proposalId")])
        except KeyError as exc:
            raise WorkflowError("INTERNAL_ERROR", f"Budget events require {exc.args[0]}") from None
        text = encode_json(event)
        cursor = self._execute(
            "INSERT INTO events (run_id, type, payload, at, budget_key) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (run_id, BUDGET_EVENT, text, time.time(), key),
            ("run", run_id),
        )
        return bool(cursor.rowcount)

    def budget_events(self, run_id: str) -> list[dict[str, Any]]:
        """The run's budget events across all budget versions, oldest first."""
        subject = ("run", run_id)
        with self._read(subject) as connection:
            # The planner would otherwise walk all of the run's events for a handful of rows.
            rows = connection.execute(
                "SELECT payload FROM events INDEXED BY budget_events "
                "WHERE run_id = ? AND budget_key IS NOT NULL ORDER BY seq",
                (run_id,),
            ).fetchall()
            if not rows:
                self._require(connection, subject)
        return [decode_optional(row[0]) for row in rows]

    # -- worktrees ---------------------------------------------------------------------------
    def put_worktree(self, record: WorktreeRecord) -> None:
        """Insert the worktree of `record.owner`, or replace it (`creating` then `ready`)."""
        self._execute(WORKTREES.upsert, WORKTREES.row(record), ("run", record.run_id))

    def worktrees(self, run_id: str) -> list[WorktreeRecord]:
        subject = ("run", run_id)
        with self._read(subject) as connection:
            rows = connection.execute(
                f"{WORKTREES.select} WHERE run_id = ? ORDER BY rowid", (run_id,)
            ).fetchall()
            if not rows:
                self._require(connection, subject)
        return [WORKTREES.decode(row) for row in rows]

    # -- leases (DESIGN 6) -------------------------------------------------------------------
    def acquire_lease(self, run_id: str, owner_token: str, pid: int, stale_after: float = 10.0) -> None:
        """Make `owner_token` (process `pid`) the run's owner, or raise `RUN_OWNED`.

        Succeeds when the run has no owner, is already ours, or its owner is gone: its pid is
        dead on this host (or reused by another process), or it has not renewed the lease for
        `stale_after` seconds. Check and take happen under the write lock, so two processes
        racing for one run cannot both win.
        """
        now = time.time()
        with self._write(subject=("run", run_id)) as connection:
            holder = connection.execute(
                f"SELECT {_LEASE_COLUMNS} FROM leases WHERE run_id = ?", (run_id,)
            ).fetchone()
            if holder is not None and holder[0] != owner_token and _lease_live(holder, now, stale_after):
                raise _owned(run_id, holder[1])
            connection.execute(
                "INSERT INTO leases (run_id, owner_token, pid, host, pid_start, acquired_at, heartbeat_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
                "owner_token = excluded.owner_token, pid = excluded.pid, host = excluded.host, "
                "pid_start = excluded.pid_start, acquired_at = excluded.acquired_at, "
                "heartbeat_at = excluded.heartbeat_at",
                (run_id, owner_token, pid, host_name(), process_start(pid), now, now),
            )

    def renew_lease(self, run_id: str, owner_token: str) -> None:
        """Refresh our lease's heartbeat; `RUN_OWNED` if it is no longer ours (the run must stop)."""
        subject = ("run", run_id)
        with self._write(subject=subject) as connection:
            cursor = connection.execute(
                "UPDATE leases SET heartbeat_at = ? WHERE run_id = ? AND owner_token = ?",
                (time.time(), run_id, owner_token),
            )
            if cursor.rowcount:
                return
            holder = connection.execute("SELECT pid FROM leases WHERE run_id = ?", (run_id,)).fetchone()
            if holder is None:
                self._require(connection, subject)
                raise WorkflowError("RUN_OWNED", f"Workflow run {run_id} ownership lease was lost")
            raise _owned(run_id, holder[0])

    def release_lease(self, run_id: str, owner_token: str) -> bool:
        """Give the run up if we own it; False when the lease was not ours (then nothing changes)."""
        cursor = self._execute(
            "DELETE FROM leases WHERE run_id = ? AND owner_token = ?", (run_id, owner_token)
        )
        return bool(cursor.rowcount)

    def lease_owner(self, run_id: str, stale_after: float = 10.0) -> tuple[int, str] | None:
        """`(pid, token)` of the run's live owner, or None when nobody (alive) owns it."""
        subject = ("run", run_id)
        with self._read(subject) as connection:
            holder = connection.execute(
                f"SELECT {_LEASE_COLUMNS} FROM leases WHERE run_id = ?", (run_id,)
            ).fetchone()
            if holder is None:
                self._require(connection, subject)
                return None
        if not _lease_live(holder, time.time(), stale_after):
            return None
        return int(holder[1]), str(holder[0])


def _check_updatable(kind: str, fields: dict[str, Any], allowed: frozenset[str]) -> None:
    refused = fields.keys() - allowed
    if refused:
        raise WorkflowError(
            "INTERNAL_ERROR", f"{kind} fields cannot be updated: {', '.join(sorted(refused))}"
        )


def _lease_live(holder: tuple[Any, ...], now: float, stale_after: float) -> bool:
    _, pid, host, pid_start, heartbeat_at = holder
    if now - heartbeat_at > stale_after:
        return False
    return host != host_name() or process_alive(pid, pid_start)


def _duplicate_path(path: str) -> WorkflowError:
    return WorkflowError("DUPLICATE_NAME", f"Completed structural path already exists: {path}")


def _owned(run_id: str, pid: int) -> WorkflowError:
    return WorkflowError("RUN_OWNED", f"Workflow run {run_id} is already owned by process {pid}")


def _store_error(location: str, exc: sqlite3.Error) -> StoreError:
    name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    return StoreError(f"Run store {location} failed: {exc} ({name})")
