"""The git worktrees of one run's `withWorktree` scopes (spec A.8, G.1 "Worktrees").

Each scope owner gets a branch `piflow/<runId>/<key>` and a worktree `<run dir>/worktrees/<key>`,
made when the scope's first agent starts. Its base is a snapshot of the launch repository's
working tree as it is at that moment — uncommitted and untracked files included, ignored files
not — committed on top of HEAD. The snapshot is built in a private index file, so the user's
index, HEAD, branch and working tree are never written.

Crash safety: `worktrees/worktree-<key>.creating` exists while a worktree is being made, and
the store's record is written only once the worktree is complete. A marker is an unfinished
creation: the next `ensure` removes what it left and starts over. Without a marker, a branch or
directory that is already there is not piflow's: creation fails and leaves it as it is.
Any failure is WORKTREE_FAILED, after undoing what the failing operation made.

A repository holding the run store itself (`store = ".piflow/runs.db"`) never has the store's
files or run directories in a snapshot.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import anyio.to_thread

from piflow.engine.git import failure_message, git_output, run_git
from piflow.engine.lifecycle import WorktreeState
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


@dataclass(slots=True)
class RemovedWorktrees:
    """What deleting a run's worktrees did: branches deleted (with the tip they had, to recover
    one with `git branch NAME TIP`) and branches kept because they are checked out elsewhere."""

    branches: list[tuple[str, str]] = field(default_factory=list)
    kept: list[tuple[str, Path]] = field(default_factory=list)


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
    would remake its worktrees from scratch; the engine passes its store, whose files snapshots
    then leave out.
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
    def ensure(self, owner: str, continues: str | None = None) -> tuple[WorktreeRecord, bool]:
        """The owner's worktree, made now if needed; the flag says it was (emit `worktree-created`).

        `continues`: a commit of the owner's branch made elsewhere (a Temporal worker's clone
        fetched it): the branch is set there and checked out instead of a new snapshot.
        """
        with self._lock(owner), _reported():
            record = self._record(owner)
            if record is not None and not self._marker(worktree_key(self.run_id, owner)).exists():
                if not (Path(record.path) / ".git").exists():
                    raise WorkflowError("WORKTREE_FAILED", f"Worktree of {owner} is missing: {record.path}")
                self._ready[owner] = record
                return record, False
            record = self._create(owner, continues)
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

    def release(self, owner: str) -> None:
        """Remove the owner's worktree but keep its branch: a Temporal worker checks a scope out
        for one attempt only (the next attempt may run on another worker)."""
        with self._lock(owner), _reported():
            self._ready.pop(owner, None)
            repository = self._repository()
            path = self._dir / worktree_key(self.run_id, owner)
            if path in self._registered(repository):
                self._remove_worktree(repository, path)
            elif path.exists():
                shutil.rmtree(path)

    async def commit_attempt_async(self, owner: str) -> WorkflowError | None:
        """Record an attempt's work; a failure is returned, not raised, so the caller reports the
        agent's own failure (or cancellation) first and this one only for an attempt that succeeded."""
        try:
            await self.commit_async(owner)
        except WorkflowError as exc:
            return exc
        return None

    def changed(self) -> list[WorktreeRecord]:
        """Worktrees whose branch moved past its snapshot: the run result's "Changes" lines."""
        records = self._records()
        if not records:
            return []
        repository = self._repository()
        tips = self._branches(repository)
        return [r for r in records if tips.get(f"refs/heads/{r.branch}", r.base) != r.base]

    def remove_all(self) -> RemovedWorktrees:
        """Delete the run's worktrees, branches and worktree files (run deletion).

        Only branches piflow made for this run (recorded, or named by an unfinished creation's
        marker) go, each only at the commit it was seen at; one checked out outside the run's
        worktrees (the user switched to it) is kept. A launch cwd that is no longer in a
        repository leaves only the files to delete.
        """
        removed = RemovedWorktrees()
        with _reported():
            repository = self._find_repository()
            if repository is not None:
                checked_out: dict[str, Path] = {}
                for path, ref in self._checkouts(repository):
                    if path.is_relative_to(self._dir):
                        self._remove_worktree(repository, path)
                    elif ref is not None:
                        checked_out[ref] = path
                ours = self._own_branches()
                for ref, tip in self._branches(repository).items():
                    if ref[len("refs/heads/") :] not in ours:
                        continue
                    if ref in checked_out:
                        removed.kept.append((ref[len("refs/heads/") :], checked_out[ref]))
                    else:
                        removed.branches.append((ref[len("refs/heads/") :], tip))
                if removed.branches:
                    commands = "".join(f"delete refs/heads/{branch} {tip}\n" for branch, tip in removed.branches)
                    run_git(repository.root, "update-ref", "--stdin", input=commands)
            if self._dir.exists():
                shutil.rmtree(self._dir)
            self._ready.clear()
        return removed

    async def ensure_async(self, owner: str) -> tuple[WorktreeRecord, bool]:
        return await anyio.to_thread.run_sync(self.ensure, owner)

    async def commit_async(self, owner: str, message: str = ATTEMPT_MESSAGE) -> str | None:
        return await anyio.to_thread.run_sync(self.commit, owner, message)

    async def changed_async(self) -> list[WorktreeRecord]:
        if not self._records():  # no worktree, nothing to ask git: no thread to start (and stop) either
            return []
        return await anyio.to_thread.run_sync(self.changed)

    async def remove_all_async(self) -> RemovedWorktrees:
        return await anyio.to_thread.run_sync(self.remove_all)

    # -- creation -----------------------------------------------------------------------------
    def _create(self, owner: str, continues: str | None = None) -> WorktreeRecord:
        repository = self._repository()
        key = worktree_key(self.run_id, owner)
        path = self._dir / key
        branch = f"{branch_prefix(self.run_id)}/{key}"
        marker = self._marker(key)
        if marker.exists():
            self._discard(repository, path, branch)  # what our own unfinished creation left
        elif continues is None:
            self._refuse_occupied(repository, path, branch)
        self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        marker.write_text(owner + "\n", encoding="utf-8", errors="surrogateescape")
        try:
            if continues is None:
                base = self._snapshot(repository, key)
                run_git(repository.root, "update-ref", "-m", SNAPSHOT_MESSAGE, f"refs/heads/{branch}", base, "")
            else:
                base = continues
                run_git(repository.root, "update-ref", "-m", ATTEMPT_MESSAGE, f"refs/heads/{branch}", base)
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
                state=WorktreeState.READY,
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
        """A pathspec leaving out piflow's own files that lie inside the repository.

        Otherwise a snapshot would take in other scopes' and runs' worktrees (as nested
        repositories), the run store's database and the runs' logs. Paths the user's ignore rules
        already leave out are not named: `git add` fails on an exclusion of an ignored path.
        """
        own = [self._dir, *(self._store.own_paths() if self._store is not None else [])]
        inside = sorted({
            path.relative_to(repository.root).as_posix()
            for path in (p.parent.resolve() / p.name for p in own)
            if path.is_relative_to(repository.root) and path != repository.root
        })
        if not inside:
            return []
        listing = run_git(repository.root, "check-ignore", "--stdin", "-z", input="\0".join(inside) + "\0", ok=(0, 1))
        ignored = set(listing.stdout.split("\0"))
        excluded = [path for path in inside if path not in ignored]
        return [".", *(f":(exclude,literal){path}" for path in excluded)] if excluded else []

    def _refuse_occupied(self, repository: _Repository, path: Path, branch: str) -> None:
        """A branch or directory piflow did not make is someone's: fail rather than replace it."""
        if f"refs/heads/{branch}" in self._branches(repository):
            raise WorkflowError(
                "WORKTREE_FAILED", f"branch {branch} already exists and is not piflow's; it was left as it is"
            )
        if path.exists() or path.is_symlink():
            raise WorkflowError(
                "WORKTREE_FAILED", f"the worktree directory {path} is occupied; it was left as it is"
            )

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
        return [path for path, _ in self._checkouts(repository)]

    def _checkouts(self, repository: _Repository) -> list[tuple[Path, str | None]]:
        """Every worktree git knows of (existing or not) and the branch ref it has checked out."""
        listing = git_output(repository.root, "worktree", "list", "--porcelain", "-z")
        found: list[tuple[Path, str | None]] = []
        for line in listing.split("\0"):
            if line.startswith("worktree "):
                found.append((Path(line[len("worktree ") :]), None))
            elif line.startswith("branch ") and found:
                found[-1] = (found[-1][0], line[len("branch ") :])
        return found

    def _own_branches(self) -> set[str]:
        """The branches piflow made for this run: recorded ones, and those of unfinished creations."""
        owners = set(self._ready)
        if self._store is not None:
            owners.update(record.owner for record in self._store.worktrees(self.run_id))
        if self._dir.is_dir():
            for marker in self._dir.glob("worktree-*.creating"):
                owners.add(marker.read_text(encoding="utf-8", errors="surrogateescape").removesuffix("\n"))
        return {f"{branch_prefix(self.run_id)}/{worktree_key(self.run_id, owner)}" for owner in owners}

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
        return [r for r in self._store.worktrees(self.run_id) if r.state == WorktreeState.READY]

    def _marker(self, key: str) -> Path:
        return self._dir / f"worktree-{key}.creating"

    def _lock(self, owner: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(owner, threading.Lock())


def delete_run(store: RunStore, run_id: str) -> RemovedWorktrees:
    """Delete a run with its worktrees, branches and run directory; never a run with a live owner.

    The deleter takes the run's lease first (`RUN_OWNED` while an owner is alive), so no resume
    can start while the worktrees go; the record goes last, so a failure leaves a run that can
    be deleted again.
    """
    record = store.get_run(run_id)
    if record is None:
        raise WorkflowError("RESUME_INCOMPATIBLE", f"Unknown workflow run: {run_id}")
    import uuid  # loads `platform`: only a deletion pays for it, not every run

    token = f"delete-{uuid.uuid4().hex}"
    store.acquire_lease(run_id, token, os.getpid())
    try:
        removed = RunWorktrees(run_id, record.cwd, store.run_dir(run_id), store).remove_all()
        run_dir = store.run_dir(run_id)
        if run_dir.exists():
            with _reported():
                shutil.rmtree(run_dir)
    except BaseException:
        store.release_lease(run_id, token)
        raise
    store.delete_run(run_id, owner_token=token)
    return removed
