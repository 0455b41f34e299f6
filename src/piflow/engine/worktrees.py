"""The git worktrees of one run's `withWorktree` scopes (spec A.8, G.1 "Worktrees").

Each scope owner gets a branch `piflow/<runId>/<key>` and a worktree `<run dir>/worktrees/<key>`,
made when the scope's first agent starts. Its base is a snapshot of the launch repository's
working tree as it is at that moment — uncommitted and untracked files included, ignored files
not — committed on top of HEAD. The snapshot is built in a private index file, so the user's
index, HEAD, branch and working tree are never written.

Crash safety: `worktrees/worktree-<key>.creating` exists while a worktree is being made, and
the store's record is written only once the worktree is complete. A marker, or leftovers with
no record, are an unfinished creation: the next `ensure` removes what it left and starts over.
Any failure is WORKTREE_FAILED, after undoing what the failing operation made.

Every operation blocks on git; the engine calls the `*_async` twins, which run them on a
worker thread. Operations on one owner are serialised (parallel agents share a scope's
worktree); different owners proceed concurrently.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import anyio.to_thread

from piflow.engine.git import failure_message, git_output, run_git
from piflow.engine.store import RunStore, WorktreeRecord
from piflow.errors import WorkflowError

IDENTITY: Final = "pi-extensible-workflows"
IDENTITY_EMAIL: Final = "pi-extensible-workflows@localhost"
SNAPSHOT_MESSAGE: Final = "pi-extensible-workflows runtime snapshot"
SNAPSHOT_DATE: Final = "2000-01-01T00:00:00Z"
ATTEMPT_MESSAGE: Final = "pi-extensible-workflows agent attempt"
OUTSIDE_REPOSITORY: Final = "launch cwd is outside the repository"

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]")
_NOT_A_WORK_TREE: Final = ("not a git repository", "must be run in a work tree")


def worktree_key(run_id: str, owner: str) -> str:
    """sha256(`runId\\0owner`)[:16]: stable across resumes, short enough for paths and refs."""
    digest = hashlib.sha256(f"{run_id}\0{owner}".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:16]


def branch_prefix(run_id: str) -> str:
    """Every branch of the run lives under this, so deleting the run can find them all."""
    return f"piflow/{_UNSAFE.sub('_', run_id)}"


def _identity(date: str | None = None) -> dict[str, str]:
    """Author and committer of piflow's commits; a fixed `date` makes the snapshot reproducible."""
    env = {
        "GIT_AUTHOR_NAME": IDENTITY,
        "GIT_AUTHOR_EMAIL": IDENTITY_EMAIL,
        "GIT_COMMITTER_NAME": IDENTITY,
        "GIT_COMMITTER_EMAIL": IDENTITY_EMAIL,
    }
    if date is not None:
        env.update({"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date})
    return env


def _confined(worktree: Path) -> dict[str, str]:
    """Stop git's repository discovery at the worktree itself.

    A worktree whose `.git` file went missing must fail, not silently act on whatever
    repository encloses the run directory (a home directory under version control, say).
    """
    return {"GIT_CEILING_DIRECTORIES": str(worktree.parent)}


@contextmanager
def _reported() -> Iterator[None]:
    """File-system failures (disk full, permissions) are worktree failures too."""
    try:
        yield
    except OSError as exc:
        raise WorkflowError("WORKTREE_FAILED", str(exc)) from exc


@dataclass(frozen=True, slots=True)
class _Repository:
    """Where the launch cwd sits: the top of its work tree, its path below it, its index file."""

    root: Path
    prefix: str
    index: Path


class RunWorktrees:
    """The worktrees of one run, keyed by `withWorktree` owner id.

    `run_dir` must be the run's own directory: `remove_all` deletes `<run_dir>/worktrees`.
    Without a `store`, records live only in this object, so a new instance (a resumed run)
    would remake its worktrees from scratch; the engine passes its store.
    """

    def __init__(
        self,
        run_id: str,
        launch_cwd: str | os.PathLike[str],
        run_dir: str | os.PathLike[str],
        store: RunStore | None = None,
    ) -> None:
        self.run_id = run_id
        self._launch_cwd = Path(launch_cwd)
        self._dir = Path(run_dir).resolve() / "worktrees"
        self._store = store
        self._ready: dict[str, WorktreeRecord] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    # -- operations ---------------------------------------------------------------------------
    def ensure(self, owner: str) -> tuple[WorktreeRecord, bool]:
        """The owner's worktree, made now if needed; the flag says it was (emit `worktree-created`)."""
        with self._lock(owner), _reported():
            record = self._record(owner)
            if record is not None and not self._marker(worktree_key(self.run_id, owner)).exists():
                if not (Path(record.path) / ".git").exists():
                    raise WorkflowError("WORKTREE_FAILED", f"Worktree of {owner} is missing: {record.path}")
                self._ready[owner] = record
                return record, False
            record = self._create(owner)
            self._ready[owner] = record
            return record, True

    def commit(self, owner: str, message: str = ATTEMPT_MESSAGE) -> str | None:
        """Commit everything in the owner's worktree after an agent attempt; the new commit, if any.

        Plumbing rather than `git commit`: no hooks, template, editor or cleanup settings of
        the user's can change what is recorded.
        """
        with self._lock(owner), _reported():
            record = self._record(owner)
            if record is None:
                raise WorkflowError("INTERNAL_ERROR", f"No worktree was made for {owner}")
            path = Path(record.path)
            env = _confined(path)
            run_git(path, "add", "--all", env=env)
            tree = git_output(path, "write-tree", env=env)
            head, head_tree = git_output(path, "rev-parse", "HEAD", "HEAD^{tree}", env=env).split()
            if tree == head_tree:
                return None
            commit = git_output(
                path, "commit-tree", "--no-gpg-sign", "-p", head, "-m", message, tree, env=env | _identity()
            )
            run_git(path, "update-ref", "-m", message, "HEAD", commit, head, env=env)
            return commit

    def changed(self) -> list[WorktreeRecord]:
        """Worktrees whose branch moved past its snapshot: the run result's "Changes" lines."""
        records = self._records()
        if not records:
            return []
        repository = self._repository()
        tips = self._branches(repository)
        return [r for r in records if tips.get(f"refs/heads/{r.branch}", r.base) != r.base]

    def remove_all(self) -> None:
        """Delete the run's worktrees, branches and worktree files (run deletion).

        A launch cwd that is no longer in a repository leaves only the files to delete.
        """
        with _reported():
            repository = self._find_repository()
            if repository is not None:
                for path in self._registered(repository):
                    if path.is_relative_to(self._dir):
                        self._remove_worktree(repository, path)
                refs = self._branches(repository)
                if refs:
                    commands = "".join(f"delete {ref}\n" for ref in refs)
                    run_git(repository.root, "update-ref", "--stdin", input=commands)
            if self._dir.exists():
                shutil.rmtree(self._dir)
            self._ready.clear()

    async def ensure_async(self, owner: str) -> tuple[WorktreeRecord, bool]:
        return await anyio.to_thread.run_sync(self.ensure, owner)

    async def commit_async(self, owner: str, message: str = ATTEMPT_MESSAGE) -> str | None:
        return await anyio.to_thread.run_sync(self.commit, owner, message)

    async def changed_async(self) -> list[WorktreeRecord]:
        return await anyio.to_thread.run_sync(self.changed)

    async def remove_all_async(self) -> None:
        await anyio.to_thread.run_sync(self.remove_all)

    # -- creation -----------------------------------------------------------------------------
    def _create(self, owner: str) -> WorktreeRecord:
        repository = self._repository()
        key = worktree_key(self.run_id, owner)
        path = self._dir / key
        branch = f"{branch_prefix(self.run_id)}/{key}"
        marker = self._marker(key)
        self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        marker.write_text(owner + "\n", encoding="utf-8", errors="surrogateescape")
        try:
            self._discard(repository, path, branch)
            base = self._snapshot(repository, key)
            run_git(repository.root, "update-ref", "-m", SNAPSHOT_MESSAGE, f"refs/heads/{branch}", base, "")
            run_git(repository.root, "worktree", "add", "--quiet", str(path), branch)
            cwd = path / repository.prefix
            cwd.mkdir(parents=True, exist_ok=True)  # the launch cwd may hold only ignored files
            record = WorktreeRecord(
                run_id=self.run_id,
                owner=owner,
                path=str(path),
                branch=branch,
                base=base,
                cwd=str(cwd),
                state="ready",
            )
            if self._store is not None:
                self._store.put_worktree(record)
        except BaseException:
            # If the cleanup fails too, the marker stays and the next `ensure` retries it.
            with suppress(WorkflowError, OSError):
                self._discard(repository, path, branch)
                marker.unlink()
            raise
        marker.unlink()
        return record

    def _snapshot(self, repository: _Repository, key: str) -> str:
        """Commit the launch work tree as it is now, on top of HEAD (none in a repo without commits).

        The private index starts as a copy of the user's: tracked files stay tracked even if
        they match an ignore rule, sparse-checkout entries are kept, and git's stat cache spares
        re-reading unchanged files. `copy2` keeps the index's mtime, which git's racy-file
        check compares file times against.
        """
        head = run_git(repository.root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", ok=(0, 1))
        parents = ["-p", head.stdout.strip()] if head.returncode == 0 else []
        index = self._dir / f"worktree-{key}.index"
        env = {"GIT_INDEX_FILE": str(index)}
        try:
            if repository.index.is_file():
                shutil.copy2(repository.index, index)
            run_git(repository.root, "add", "--all", "--", *self._outside_run_dir(repository), env=env)
            tree = git_output(repository.root, "write-tree", env=env)
        finally:
            index.unlink(missing_ok=True)
        return git_output(
            repository.root,
            "commit-tree",
            "--no-gpg-sign",
            *parents,
            "-m",
            SNAPSHOT_MESSAGE,
            tree,
            env=_identity(SNAPSHOT_DATE),
        )

    def _outside_run_dir(self, repository: _Repository) -> list[str]:
        """A pathspec leaving out the worktrees when the run directory is inside the repository.

        Otherwise the snapshot would take in other scopes' worktrees (as nested repositories).
        """
        if not self._dir.is_relative_to(repository.root):
            return []
        return [".", f":(exclude){self._dir.relative_to(repository.root).as_posix()}"]

    def _discard(self, repository: _Repository, path: Path, branch: str) -> None:
        """Remove the worktree, branch and index file an unfinished creation may have left."""
        if path in self._registered(repository):
            self._remove_worktree(repository, path)
        elif path.exists():
            shutil.rmtree(path)
        ref = f"refs/heads/{branch}"
        if ref in self._branches(repository):  # deleting an absent ref would still take its lock
            run_git(repository.root, "update-ref", "-d", ref)
        for name in (f"worktree-{path.name}.index", f"worktree-{path.name}.index.lock"):
            (self._dir / name).unlink(missing_ok=True)

    def _remove_worktree(self, repository: _Repository, path: Path) -> None:
        """Delete a registered worktree, even a locked or half-checked-out one.

        The directory goes first: `git worktree remove` refuses a directory that lost its
        `.git` file (a creation killed half-way) but accepts one that is gone.
        """
        if path.exists():
            shutil.rmtree(path)
        run_git(repository.root, "worktree", "remove", "--force", "--force", str(path))

    # -- lookups ------------------------------------------------------------------------------
    def _repository(self) -> _Repository:
        repository = self._find_repository()
        if repository is None:
            raise WorkflowError("WORKTREE_FAILED", OUTSIDE_REPOSITORY)
        return repository

    def _find_repository(self) -> _Repository | None:
        """The launch cwd's repository, or None when the launch cwd is not in a work tree."""
        if not self._launch_cwd.is_dir():
            return None
        args = ("rev-parse", "--show-toplevel", "--show-prefix", "--git-path", "index")
        completed = run_git(self._launch_cwd, *args, ok=range(256))
        if completed.returncode != 0:
            if any(text in completed.stderr for text in _NOT_A_WORK_TREE):
                return None
            raise WorkflowError("WORKTREE_FAILED", failure_message(args, completed))
        root, prefix, index = completed.stdout.split("\n")[:3]
        return _Repository(Path(root), prefix, self._launch_cwd / index)

    def _registered(self, repository: _Repository) -> list[Path]:
        """The paths of all worktrees git knows of in the repository, existing or not."""
        listing = git_output(repository.root, "worktree", "list", "--porcelain", "-z")
        prefix = "worktree "
        return [Path(field[len(prefix) :]) for field in listing.split("\0") if field.startswith(prefix)]

    def _branches(self, repository: _Repository) -> dict[str, str]:
        """The run's branches: full ref name → tip commit."""
        listing = git_output(
            repository.root,
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            f"refs/heads/{branch_prefix(self.run_id)}",
        )
        return dict(line.split(" ", 1) for line in listing.splitlines())

    def _record(self, owner: str) -> WorktreeRecord | None:
        """The owner's complete worktree: made by this object or, in a resumed run, in the store."""
        if owner in self._ready:
            return self._ready[owner]
        return next((r for r in self._records() if r.owner == owner), None)

    def _records(self) -> list[WorktreeRecord]:
        if self._store is None:
            return list(self._ready.values())
        return [r for r in self._store.worktrees(self.run_id) if r.state == "ready"]

    def _marker(self, key: str) -> Path:
        return self._dir / f"worktree-{key}.creating"

    def _lock(self, owner: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(owner, threading.Lock())
