"""The run store's schema as an ordered list of migrations, applied atomically when a store opens.

`PRAGMA user_version` is the number of migrations applied. Migrations are append-only: a
released migration is never edited, a change is a new entry. Every table that references a
run or an agent has an index starting with that column, so `delete_run`'s cascades and the
per-run queries never scan other runs' rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Final

from piflow.errors import WorkflowError

Migration = tuple[str, ...]

_V1: Final[Migration] = (
    """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        workflow_name TEXT NOT NULL,
        script_path TEXT,
        cwd TEXT NOT NULL,
        state TEXT NOT NULL,
        phase TEXT,
        error TEXT,
        budget TEXT,
        budget_version INTEGER NOT NULL,
        usage TEXT NOT NULL,
        concurrency INTEGER NOT NULL,
        backend TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        has_result INTEGER NOT NULL,
        result TEXT,
        warnings TEXT NOT NULL
    )
    """,
    "CREATE INDEX runs_by_cwd ON runs (cwd, created_at)",
    "CREATE INDEX runs_by_script ON runs (script_path, created_at)",
    # The launch source and snapshot are large and read only on resume: kept out of `runs`
    # so listing runs never pages them in.
    """
    CREATE TABLE launches (
        run_id TEXT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
        script TEXT NOT NULL,
        snapshot TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE journal (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        path TEXT NOT NULL,
        value TEXT NOT NULL,
        UNIQUE (run_id, path)
    )
    """,
    """
    CREATE TABLE agents (
        id TEXT PRIMARY KEY,
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        n INTEGER NOT NULL,
        name TEXT NOT NULL,
        label TEXT,
        role TEXT,
        requested_model TEXT,
        model TEXT NOT NULL,
        tools TEXT NOT NULL,
        state TEXT NOT NULL,
        structural_path TEXT NOT NULL,
        journal_path TEXT,
        parent_id TEXT,
        parent_breadcrumb TEXT,
        worktree_owner TEXT,
        attempts INTEGER NOT NULL,
        tokens_input INTEGER NOT NULL,
        tokens_output INTEGER NOT NULL,
        cache_read INTEGER NOT NULL,
        cache_write INTEGER NOT NULL,
        cost_usd REAL NOT NULL,
        activity TEXT,
        error TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        UNIQUE (run_id, n)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE attempts (
        agent_id TEXT NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
        attempt INTEGER NOT NULL,
        started_at REAL NOT NULL,
        ended_at REAL,
        error TEXT,
        tokens_input INTEGER NOT NULL,
        tokens_output INTEGER NOT NULL,
        cache_read INTEGER NOT NULL,
        cache_write INTEGER NOT NULL,
        cost_usd REAL NOT NULL,
        transcript_path TEXT,
        session_id TEXT,
        PRIMARY KEY (agent_id, attempt)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE checkpoints (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        label TEXT NOT NULL,
        prompt TEXT NOT NULL,
        context TEXT,
        state TEXT NOT NULL,
        created_at REAL NOT NULL,
        answered_at REAL,
        UNIQUE (run_id, label)
    )
    """,
    """
    CREATE TABLE decisions (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        proposal_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL,
        state TEXT NOT NULL,
        created_at REAL NOT NULL,
        answered_at REAL,
        UNIQUE (run_id, proposal_id)
    )
    """,
    # `seq` is AUTOINCREMENT so a sequence number is never reused after `delete_run`: a reader
    # following `events(after_seq=...)` would otherwise skip events that reuse old numbers.
    # `budget_key` is set only on budget events; its unique index is their de-duplication.
    """
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        type TEXT NOT NULL,
        payload TEXT,
        at REAL NOT NULL,
        budget_key TEXT
    )
    """,
    "CREATE INDEX events_by_run ON events (run_id, seq)",
    "CREATE UNIQUE INDEX budget_events ON events (run_id, budget_key) WHERE budget_key IS NOT NULL",
    """
    CREATE TABLE worktrees (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        owner TEXT NOT NULL,
        path TEXT NOT NULL,
        branch TEXT NOT NULL,
        base TEXT NOT NULL,
        cwd TEXT NOT NULL,
        state TEXT NOT NULL,
        UNIQUE (run_id, owner)
    )
    """,
    # `pid_start` is the holder's start time in clock ticks since boot (Linux /proc), so a
    # pid reused by an unrelated process is not mistaken for a live owner.
    """
    CREATE TABLE leases (
        run_id TEXT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
        owner_token TEXT NOT NULL,
        pid INTEGER NOT NULL,
        host TEXT NOT NULL,
        pid_start INTEGER,
        acquired_at REAL NOT NULL,
        heartbeat_at REAL NOT NULL
    )
    """,
)

APPLICATION_ID: Final = 0x7069666C
"""`PRAGMA application_id` of a piflow run store ("pifl"): how piflow knows a file is its own."""

_V2: Final[Migration] = (f"PRAGMA application_id = {APPLICATION_ID}",)

_V3: Final[Migration] = ("ALTER TABLE journal ADD COLUMN kind TEXT",)
"""Each journal entry names the kind of operation that recorded it (NULL for entries older than this),
so a replay that meets another kind's outcome at a path fails instead of returning it."""

_V4: Final[Migration] = (
    """
    CREATE TABLE conversations (
        run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
        conversation TEXT NOT NULL,
        turn INTEGER NOT NULL,
        state TEXT NOT NULL,
        PRIMARY KEY (run_id, conversation)
    )
    """,
)
"""Each conversation's head: the backend's state after its last successful turn (its message list, or
pi's session file), written with the turn's journal entry so a resumed conversation continues it."""

_V5: Final[Migration] = ("ALTER TABLE attempts ADD COLUMN setup TEXT",)
"""Each attempt's set-up: the setup hooks that ran and the model, thinking, tools and cwd it started with."""

_V6: Final[Migration] = ("CREATE INDEX agents_by_state ON agents (run_id, state)",)
"""A run's agents by state: a follower counts them and finds the running ones ten times a second
while a big run executes; without it each count looked up every agent of the run (15 ms at 5,000)."""

MIGRATIONS: Final[tuple[Migration, ...]] = (_V1, _V2, _V3, _V4, _V5, _V6)
"""Migration `i` takes a store from version `i` to version `i + 1`."""

_V1_TABLES: Final = frozenset({"runs", "launches", "journal", "agents", "events", "leases"})


def check_piflow_store(connection: sqlite3.Connection, location: str) -> None:
    """Refuse a database that is not a piflow run store, before anything writes to it.

    A store path can come from configuration, so it may name another application's database:
    switching that to WAL or adding tables to it would damage it. piflow's own are marked with
    `APPLICATION_ID`; besides those only an empty database (a new store) and a version-1 store
    from before the mark (piflow's tables, no mark) are accepted. Reads only, in one read
    transaction: another process may be creating the same new store, and a mark read before its
    migration commits with tables read after it looked like another application's database.
    """
    connection.execute("BEGIN")
    try:
        application_id = connection.execute("PRAGMA application_id").fetchone()[0]
        version = schema_version(connection)
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        objects = connection.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    except sqlite3.OperationalError:  # (locked, unreadable: the store's own error says so)
        raise
    except sqlite3.DatabaseError as error:
        raise _not_a_store(location, f"not a SQLite database ({error})") from None
    finally:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
    if application_id == APPLICATION_ID:
        return
    if application_id == 0 and ((version == 0 and objects == 0) or (version == 1 and tables >= _V1_TABLES)):
        return
    what = f"application id {application_id:#x}" if application_id else f"tables {', '.join(sorted(tables)) or 'none'}"
    raise _not_a_store(location, f"a SQLite database of another application ({what})")


def _not_a_store(location: str, what: str) -> WorkflowError:
    return WorkflowError(
        "CONFIG_ERROR",
        f"{location} is not a piflow run store: it is {what}. piflow leaves it untouched; "
        "set [piflow] store in piflow.toml to a new file (or remove the setting to use the default store)",
    )


def schema_version(connection: sqlite3.Connection) -> int:
    version: int = connection.execute("PRAGMA user_version").fetchone()[0]
    return version


def migrate(
    connection: sqlite3.Connection, location: str, migrations: Sequence[Migration] = MIGRATIONS
) -> None:
    """Bring the store to the latest version in one transaction, or leave it untouched.

    The version is re-read under the write lock (`BEGIN IMMEDIATE`), so two processes opening
    a new store at once apply each migration exactly once. The connection must be in
    autocommit mode (`isolation_level=None`).
    """
    latest = len(migrations)
    if schema_version(connection) == latest:
        return
    connection.execute("BEGIN IMMEDIATE")
    try:
        version = schema_version(connection)
        if version > latest:
            raise WorkflowError(
                "INTERNAL_ERROR",
                f"Run store {location} has schema version {version}, newer than this piflow supports "
                f"({latest}); upgrade piflow or configure another store path",
            )
        for statements in migrations[version:]:
            for statement in statements:
                connection.execute(statement)
        connection.execute(f"PRAGMA user_version = {latest}")
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
