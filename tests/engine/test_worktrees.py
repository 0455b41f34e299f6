"""withWorktree worktrees on real git repositories (spec A.8, G.1 "Worktrees")."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_store_support import new_run

from piflow.engine.git import git_environment
from piflow.engine.store import RunStore
from piflow.engine.worktrees import (
    SNAPSHOT_MESSAGE,
    RunWorktrees,
    branch_prefix,
    worktree_key,
)
from piflow.errors import WorkflowError

RUN_ID = "6f1c2a9e-0b4d-4c1e-9a57-3d2f8e1b7c40"
PIFLOW = "pi-extensible-workflows <pi-extensible-workflows@localhost>"


def git(cwd: Path, *args: str) -> str:
    """Run git as the test's user would (an identity of its own, no piflow settings)."""
    env = git_environment(
        {
            "GIT_AUTHOR_NAME": "User",
            "GIT_AUTHOR_EMAIL": "user@example.com",
            "GIT_COMMITTER_NAME": "User",
            "GIT_COMMITTER_EMAIL": "user@example.com",
        }
    )
    completed = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return completed.stdout.strip()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def files(tree: Path) -> dict[str, str]:
    """Every file under `tree` outside `.git`, by relative path."""
    return {
        p.relative_to(tree).as_posix(): p.read_text()
        for p in sorted(tree.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(tree).parts
    }


def user_state(repo: Path) -> dict[str, object]:
    """What the user sees of their repository: refs, HEAD, index, status, files, stashes."""
    refs = git(repo, "for-each-ref", "--format=%(refname) %(objectname)").splitlines()
    return {
        "refs": [ref for ref in refs if not ref.startswith("refs/heads/piflow/")],
        "branch": git(repo, "symbolic-ref", "HEAD"),
        "staged": git(repo, "diff", "--cached"),
        "status": git(repo, "status", "--porcelain", "--untracked-files=all"),
        "files": files(repo),
        "index": (repo / ".git/index").read_bytes() if (repo / ".git/index").exists() else b"",
        "stash": git(repo, "stash", "list"),
    }


def branches(repo: Path) -> list[str]:
    return git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/piflow").splitlines()


def registered(repo: Path) -> list[str]:
    listing = git(repo, "worktree", "list", "--porcelain")
    return [line.removeprefix("worktree ") for line in listing.splitlines() if line.startswith("worktree ")][1:]


@pytest.fixture(autouse=True)
def _no_enclosing_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep git from finding a repository above the test's directory."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository on `main` with one commit, an ignore file and a nested directory."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "--quiet", "--initial-branch=main")
    write(root / "README.md", "hello\n")
    write(root / "src/app.py", "print('app')\n")
    write(root / "obsolete.txt", "old\n")
    write(root / ".gitignore", "*.log\nbuild/\n")
    git(root, "add", "--all")
    git(root, "commit", "--quiet", "-m", "initial")
    return root


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return tmp_path / "state" / "runs" / RUN_ID


@pytest.fixture
def worktrees(repo: Path, run_dir: Path) -> RunWorktrees:
    return RunWorktrees(RUN_ID, repo, run_dir)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    with RunStore.open(tmp_path / "state" / "runs.db") as opened:
        new_run(opened, RUN_ID)
        yield opened


# -- scopes ------------------------------------------------------------------------------------
def test_same_owner_gets_the_same_worktree(worktrees: RunWorktrees, repo: Path, run_dir: Path) -> None:
    first, created = worktrees.ensure("worktree/named/shared")
    again, created_again = worktrees.ensure("worktree/named/shared")

    key = worktree_key(RUN_ID, "worktree/named/shared")
    assert (created, created_again) == (True, False)
    assert again == first
    assert first.path == str(run_dir.resolve() / "worktrees" / key)
    assert first.branch == f"piflow/{RUN_ID}/{key}"
    assert first.cwd == first.path
    assert first.state == "ready"
    assert git(Path(first.path), "rev-parse", "HEAD") == first.base
    assert git(Path(first.path), "symbolic-ref", "--short", "HEAD") == first.branch
    assert registered(repo) == [first.path]


def test_separate_owners_get_separate_worktrees(worktrees: RunWorktrees, repo: Path) -> None:
    one, _ = worktrees.ensure("worktree/named/one")
    two, _ = worktrees.ensure("worktree/named/two")

    assert one.path != two.path and one.branch != two.branch
    assert one.base == two.base  # same work tree, same identity and date: the same snapshot
    assert sorted(branches(repo)) == sorted([one.branch, two.branch])


def test_key_is_sha256_of_run_id_and_owner() -> None:
    assert worktree_key("r", "o") == hashlib.sha256(b"r\0o").hexdigest()[:16]


def test_concurrent_ensures_of_one_owner_make_one_worktree(worktrees: RunWorktrees, repo: Path) -> None:
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(worktrees.ensure, ["shared"] * 4))

    assert [created for _, created in results].count(True) == 1
    assert len({record for record, _ in results}) == 1
    assert len(registered(repo)) == 1


# -- the snapshot ------------------------------------------------------------------------------
def test_snapshot_carries_uncommitted_staged_and_untracked_files(worktrees: RunWorktrees, repo: Path) -> None:
    write(repo / "README.md", "hello, edited\n")  # unstaged modification
    write(repo / "staged.txt", "staged\n")
    git(repo, "add", "staged.txt")
    write(repo / "src/app.py", "print('staged')\n")
    git(repo, "add", "src/app.py")
    write(repo / "src/app.py", "print('on disk')\n")  # the work tree wins over the index
    (repo / "obsolete.txt").unlink()
    write(repo / "notes/untracked.md", "draft\n")
    write(repo / "debug.log", "ignored\n")
    write(repo / "build/out.bin", "ignored\n")

    record, _ = worktrees.ensure("a")

    assert files(Path(record.path)) == {
        ".gitignore": "*.log\nbuild/\n",
        "README.md": "hello, edited\n",
        "notes/untracked.md": "draft\n",
        "src/app.py": "print('on disk')\n",
        "staged.txt": "staged\n",
    }
    assert git(Path(record.path), "status", "--porcelain") == ""


def test_snapshot_commit_is_on_top_of_head_with_the_reference_identity(worktrees: RunWorktrees, repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    write(repo / "README.md", "changed\n")

    record, _ = worktrees.ensure("a")

    fmt = "%P%n%an <%ae>%n%cn <%ce>%n%aI%n%cI%n%B"
    parent, author, committer, authored, committed, message = git(
        repo, "log", "-1", f"--format={fmt}", record.base
    ).split("\n", 5)
    assert parent == head
    assert author == committer == PIFLOW
    assert authored == committed == "2000-01-01T00:00:00+00:00"
    assert message.strip() == SNAPSHOT_MESSAGE


def test_tracked_file_matching_an_ignore_rule_stays_in_the_snapshot(worktrees: RunWorktrees, repo: Path) -> None:
    write(repo / "kept.log", "tracked on purpose\n")
    git(repo, "add", "--force", "kept.log")
    git(repo, "commit", "--quiet", "-m", "track a log")

    record, _ = worktrees.ensure("a")

    assert (Path(record.path) / "kept.log").read_text() == "tracked on purpose\n"


def test_user_repository_is_untouched(worktrees: RunWorktrees, repo: Path) -> None:
    write(repo / "README.md", "edited\n")
    write(repo / "new.txt", "new\n")
    git(repo, "add", "new.txt")
    write(repo / "untracked.txt", "u\n")
    before = user_state(repo)  # `git status` may refresh the index: read it before comparing

    record, _ = worktrees.ensure("a")
    write(Path(record.path) / "README.md", "agent edit\n")
    worktrees.commit("a")

    assert user_state(repo) == before
    assert before["branch"] == "refs/heads/main"


def test_repository_without_commits(tmp_path: Path, run_dir: Path) -> None:
    repo = tmp_path / "fresh"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    write(repo / "a.txt", "a\n")
    git(repo, "add", "a.txt")
    write(repo / "b.txt", "b\n")
    before = user_state(repo)

    record, _ = RunWorktrees(RUN_ID, repo, run_dir).ensure("a")

    assert git(repo, "log", "-1", "--format=%P", record.base) == ""
    assert files(Path(record.path)) == {"a.txt": "a\n", "b.txt": "b\n"}
    assert user_state(repo) == before


def test_empty_repository_without_commits(tmp_path: Path, run_dir: Path) -> None:
    repo = tmp_path / "empty"
    repo.mkdir()
    git(repo, "init", "--quiet")

    record, _ = RunWorktrees(RUN_ID, repo, run_dir).ensure("a")

    assert files(Path(record.path)) == {}
    assert git(repo, "log", "-1", "--format=%P", record.base) == ""


def test_launch_cwd_in_a_subdirectory(repo: Path, run_dir: Path) -> None:
    record, _ = RunWorktrees(RUN_ID, repo / "src", run_dir).ensure("a")

    assert record.cwd == str(Path(record.path) / "src")
    assert (Path(record.cwd) / "app.py").is_file()


def test_launch_cwd_holding_only_ignored_files_still_exists_in_the_worktree(repo: Path, run_dir: Path) -> None:
    write(repo / "build/cache/x.o", "ignored\n")

    record, _ = RunWorktrees(RUN_ID, repo / "build/cache", run_dir).ensure("a")

    assert record.cwd == str(Path(record.path) / "build/cache")
    assert Path(record.cwd).is_dir()
    assert not (Path(record.cwd) / "x.o").exists()


def test_run_dir_inside_the_repository_stays_out_of_snapshots(repo: Path) -> None:
    worktrees = RunWorktrees(RUN_ID, repo, repo / ".piflow" / RUN_ID)
    worktrees.ensure("one")

    two, _ = worktrees.ensure("two")

    assert ".piflow" not in git(repo, "ls-tree", "--name-only", two.base).split()


def test_inherited_git_variables_do_not_redirect_git(
    worktrees: RunWorktrees, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "--quiet")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tmp_path / "elsewhere.index"))
    write(repo / "README.md", "mine\n")

    record, _ = worktrees.ensure("a")

    assert (Path(record.path) / "README.md").read_text() == "mine\n"
    assert not (tmp_path / "elsewhere.index").exists()


def test_hooks_and_signing_are_disabled(worktrees: RunWorktrees, repo: Path, tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    for name in ("post-checkout", "pre-commit", "post-commit", "reference-transaction"):
        write(hooks / name, f"#!/bin/sh\ntouch {tmp_path}/hook-ran-{name}\n")
        (hooks / name).chmod(0o755)
    git(repo, "config", "core.hooksPath", str(hooks))
    git(repo, "config", "commit.gpgsign", "true")
    git(repo, "config", "gpg.program", "false")

    record, _ = worktrees.ensure("a")
    write(Path(record.path) / "new.txt", "x\n")
    assert worktrees.commit("a") is not None

    assert list(tmp_path.glob("hook-ran-*")) == []


# -- commits after attempts --------------------------------------------------------------------
def test_commit_records_a_dirty_worktree(worktrees: RunWorktrees) -> None:
    record, _ = worktrees.ensure("a")
    path = Path(record.path)
    write(path / "src/feature.py", "x = 1\n")
    (path / "obsolete.txt").unlink()

    commit = worktrees.commit("a")

    assert commit is not None
    assert git(path, "rev-parse", record.branch) == commit
    assert git(path, "log", "-1", "--format=%P%n%an <%ae>", commit).splitlines() == [record.base, PIFLOW]
    assert git(path, "diff", "--name-status", record.base, commit).splitlines() == [
        "D\tobsolete.txt",
        "A\tsrc/feature.py",
    ]
    assert git(path, "status", "--porcelain") == ""


def test_commit_of_a_clean_worktree_makes_no_commit(worktrees: RunWorktrees) -> None:
    record, _ = worktrees.ensure("a")

    assert worktrees.commit("a") is None
    assert git(Path(record.path), "rev-parse", "HEAD") == record.base


def test_commit_without_a_worktree_is_an_internal_error(worktrees: RunWorktrees) -> None:
    with pytest.raises(WorkflowError) as caught:
        worktrees.commit("never-ensured")

    assert caught.value.code == "INTERNAL_ERROR"


def test_changed_lists_worktrees_that_moved_past_their_snapshot(worktrees: RunWorktrees) -> None:
    edited, _ = worktrees.ensure("edited")
    worktrees.ensure("untouched")
    write(Path(edited.path) / "out.txt", "result\n")
    worktrees.commit("edited")

    assert worktrees.changed() == [edited]


def test_changed_is_empty_before_any_worktree(worktrees: RunWorktrees) -> None:
    assert worktrees.changed() == []


# -- records and resumption --------------------------------------------------------------------
def test_records_are_stored_and_reused_by_a_resumed_run(repo: Path, run_dir: Path, store: RunStore) -> None:
    record, _ = RunWorktrees(RUN_ID, repo, run_dir, store).ensure("a")
    write(Path(record.path) / "work.txt", "in progress\n")

    resumed = RunWorktrees(RUN_ID, repo, run_dir, store)
    again, created = resumed.ensure("a")

    assert store.worktrees(RUN_ID) == [record]
    assert (again, created) == (record, False)
    assert (Path(record.path) / "work.txt").read_text() == "in progress\n"
    assert resumed.commit("a") is not None
    assert resumed.changed() == [record]


def test_a_recorded_worktree_that_vanished_is_reported(repo: Path, run_dir: Path, store: RunStore) -> None:
    record, _ = RunWorktrees(RUN_ID, repo, run_dir, store).ensure("a")
    shutil.rmtree(record.path)

    with pytest.raises(WorkflowError) as caught:
        RunWorktrees(RUN_ID, repo, run_dir, store).ensure("a")

    assert (caught.value.code, caught.value.message) == ("WORKTREE_FAILED", f"Worktree of a is missing: {record.path}")


def _half_made(repo: Path, run_dir: Path, owner: str) -> tuple[Path, str]:
    """What a creation killed after `git worktree add` leaves: marker, branch, worktree, index."""
    key = worktree_key(RUN_ID, owner)
    path = run_dir.resolve() / "worktrees" / key
    branch = f"{branch_prefix(RUN_ID)}/{key}"
    path.parent.mkdir(parents=True)
    (path.parent / f"worktree-{key}.creating").write_text(owner)
    (path.parent / f"worktree-{key}.index").write_bytes(b"partial")
    git(repo, "worktree", "add", "--quiet", "-b", branch, str(path), "HEAD")
    write(path / "stray.txt", "half-made\n")
    return path, branch


def test_marker_means_an_unfinished_creation_is_redone(repo: Path, run_dir: Path, store: RunStore) -> None:
    path, branch = _half_made(repo, run_dir, "a")
    write(repo / "README.md", "since the crash\n")

    record, created = RunWorktrees(RUN_ID, repo, run_dir, store).ensure("a")

    assert created
    assert (record.path, record.branch) == (str(path), branch)
    assert git(repo, "log", "-1", "--format=%B", record.base).strip() == SNAPSHOT_MESSAGE
    assert git(repo, "rev-parse", branch) == record.base
    assert (path / "README.md").read_text() == "since the crash\n"
    assert not (path / "stray.txt").exists()
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    assert registered(repo) == [str(path)]
    assert store.worktrees(RUN_ID) == [record]


def test_marker_beats_a_ready_record(repo: Path, run_dir: Path, store: RunStore) -> None:
    """Killed after the record was stored but before the marker was removed."""
    first, _ = RunWorktrees(RUN_ID, repo, run_dir, store).ensure("a")
    marker = run_dir.resolve() / "worktrees" / f"worktree-{Path(first.path).name}.creating"
    marker.write_text("a")
    write(Path(first.path) / "stray.txt", "x\n")

    again, created = RunWorktrees(RUN_ID, repo, run_dir, store).ensure("a")

    assert created and again == first
    assert not (Path(again.path) / "stray.txt").exists()
    assert not marker.exists()


def test_worktree_that_lost_its_git_file_is_recovered(repo: Path, run_dir: Path) -> None:
    path, _ = _half_made(repo, run_dir, "a")
    (path / ".git").unlink()  # killed between registering the worktree and writing `.git`

    record, created = RunWorktrees(RUN_ID, repo, run_dir).ensure("a")

    assert created and registered(repo) == [record.path]
    assert git(Path(record.path), "rev-parse", "HEAD") == record.base


def test_creation_killed_mid_way_is_recovered(repo: Path, run_dir: Path, tmp_path: Path) -> None:
    """A real kill: git is wrapped so the process can be killed right after `worktree add`."""
    signal_file = tmp_path / "worktree-added"
    wrapper = tmp_path / "bin" / "git"
    write(
        wrapper,
        textwrap.dedent(
            f"""\
            #!/bin/sh
            {shutil.which("git")} "$@"
            status=$?
            case " $* " in *" worktree add "*) : > {signal_file}; sleep 60;; esac
            exit $status
            """
        ),
    )
    wrapper.chmod(0o755)
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from piflow.engine.worktrees import RunWorktrees; RunWorktrees(*sys.argv[1:4]).ensure('a')",
            RUN_ID,
            str(repo),
            str(run_dir),
        ],
        env={**os.environ, "PATH": f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}"},
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not signal_file.exists():
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    key = worktree_key(RUN_ID, "a")
    assert (run_dir / "worktrees" / f"worktree-{key}.creating").exists()

    record, created = RunWorktrees(RUN_ID, repo, run_dir).ensure("a")

    assert created
    assert registered(repo) == [record.path]
    assert branches(repo) == [record.branch]
    assert not (run_dir / "worktrees" / f"worktree-{key}.creating").exists()


# -- failures and rollback ---------------------------------------------------------------------
def test_launch_cwd_outside_a_repository(tmp_path: Path, run_dir: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()

    with pytest.raises(WorkflowError) as caught:
        RunWorktrees(RUN_ID, plain, run_dir).ensure("a")

    assert (caught.value.code, caught.value.message) == ("WORKTREE_FAILED", "launch cwd is outside the repository")
    assert not run_dir.exists()


def test_locked_ref_fails_and_leaves_nothing(worktrees: RunWorktrees, repo: Path, run_dir: Path) -> None:
    key = worktree_key(RUN_ID, "a")
    lock = repo / ".git/refs/heads" / branch_prefix(RUN_ID) / f"{key}.lock"
    lock.parent.mkdir(parents=True)
    lock.touch()
    before = user_state(repo)

    with pytest.raises(WorkflowError) as caught:
        worktrees.ensure("a")

    assert caught.value.code == "WORKTREE_FAILED"
    assert caught.value.message.startswith("git update-ref failed: ")
    assert "cannot lock ref" in caught.value.message
    assert "\n" not in caught.value.message
    assert (branches(repo), registered(repo)) == ([], [])
    assert list((run_dir / "worktrees").iterdir()) == []
    assert user_state(repo) == before

    lock.unlink()
    assert worktrees.ensure("a")[1]


def test_failed_worktree_add_removes_the_branch_it_made(repo: Path, run_dir: Path, store: RunStore) -> None:
    worktrees = RunWorktrees(RUN_ID, repo, run_dir, store)
    (repo / ".git/worktrees").write_text("not a directory\n")  # git cannot register a worktree

    with pytest.raises(WorkflowError) as caught:
        worktrees.ensure("a")

    assert caught.value.code == "WORKTREE_FAILED"
    assert caught.value.message.startswith("git worktree add failed: ")
    assert branches(repo) == []
    assert list((run_dir / "worktrees").iterdir()) == []
    assert store.worktrees(RUN_ID) == []


def test_failed_commit_is_reported_and_moves_nothing(worktrees: RunWorktrees) -> None:
    record, _ = worktrees.ensure("a")
    path = Path(record.path)
    write(path / "new.txt", "x\n")
    index_lock = Path(git(path, "rev-parse", "--path-format=absolute", "--git-path", "index.lock"))
    index_lock.touch()

    with pytest.raises(WorkflowError) as caught:
        worktrees.commit("a")

    assert caught.value.code == "WORKTREE_FAILED"
    assert caught.value.message.startswith("git add failed: fatal: Unable to create")
    assert git(path, "rev-parse", record.branch) == record.base


def test_worktree_without_its_git_file_does_not_commit_into_an_enclosing_repository(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GIT_CEILING_DIRECTORIES")
    git(tmp_path, "init", "--quiet")  # e.g. a home directory under version control
    worktrees = RunWorktrees(RUN_ID, repo, tmp_path / "state")
    record, _ = worktrees.ensure("a")
    (Path(record.path) / ".git").unlink()

    with pytest.raises(WorkflowError) as caught:
        worktrees.commit("a")

    assert caught.value.code == "WORKTREE_FAILED"
    assert "not a git repository" in caught.value.message
    assert not (tmp_path / ".git/index").exists()


# -- run deletion ------------------------------------------------------------------------------
def test_remove_all_deletes_worktrees_branches_and_files(worktrees: RunWorktrees, repo: Path, run_dir: Path) -> None:
    other_run = RunWorktrees("another-run", repo, run_dir.parent / "another-run")
    kept, _ = other_run.ensure("a")
    worktrees.ensure("a")
    record, _ = worktrees.ensure("b")
    write(Path(record.path) / "x.txt", "x\n")
    worktrees.commit("b")
    (run_dir / "worktrees" / "worktree-0000000000000000.creating").write_text("z")

    worktrees.remove_all()

    assert branches(repo) == [kept.branch]
    assert kept.path in registered(repo)
    assert not (run_dir / "worktrees").exists()
    assert git(repo, "symbolic-ref", "--short", "HEAD") == "main"
    assert worktrees.changed() == []


def test_remove_all_after_the_repository_is_gone(worktrees: RunWorktrees, repo: Path, run_dir: Path) -> None:
    worktrees.ensure("a")
    shutil.rmtree(repo)

    worktrees.remove_all()

    assert not (run_dir / "worktrees").exists()


def test_remove_all_keeps_a_branch_the_user_checked_out_and_the_users_own_branches(
    worktrees: RunWorktrees, repo: Path
) -> None:
    looked_at, _ = worktrees.ensure("a")
    gone, _ = worktrees.ensure("b")
    mine = f"{branch_prefix(RUN_ID)}/mine"  # under the run's prefix, but the user's
    git(repo, "branch", mine, "main")
    git(repo, "checkout", "--quiet", "--ignore-other-worktrees", looked_at.branch)

    removed = worktrees.remove_all()

    assert removed.branches == [(gone.branch, gone.base)]
    assert removed.kept == [(looked_at.branch, repo)]
    assert sorted(branches(repo)) == sorted([looked_at.branch, mine])
    assert git(repo, "symbolic-ref", "--short", "HEAD") == looked_at.branch
    assert registered(repo) == []


# -- what is not piflow's is left alone --------------------------------------------------------
def test_a_pre_existing_branch_is_never_deleted(worktrees: RunWorktrees, repo: Path, run_dir: Path) -> None:
    branch = f"{branch_prefix(RUN_ID)}/{worktree_key(RUN_ID, 'a')}"
    git(repo, "branch", branch, "main")
    tip = git(repo, "rev-parse", branch)

    with pytest.raises(WorkflowError) as caught:
        worktrees.ensure("a")

    assert caught.value.code == "WORKTREE_FAILED"
    assert caught.value.message == f"branch {branch} already exists and is not piflow's; it was left as it is"
    assert git(repo, "rev-parse", branch) == tip
    assert registered(repo) == []
    assert not run_dir.exists()
    assert worktrees.remove_all().branches == []  # nor does deleting the run take it
    assert git(repo, "rev-parse", branch) == tip


def test_an_occupied_worktree_directory_is_never_deleted(worktrees: RunWorktrees, repo: Path, run_dir: Path) -> None:
    path = run_dir.resolve() / "worktrees" / worktree_key(RUN_ID, "a")
    write(path / "precious.txt", "keep me\n")

    with pytest.raises(WorkflowError) as caught:
        worktrees.ensure("a")

    assert caught.value.code == "WORKTREE_FAILED"
    assert caught.value.message == f"the worktree directory {path} is occupied; it was left as it is"
    assert (path / "precious.txt").read_text() == "keep me\n"
    assert (branches(repo), registered(repo)) == ([], [])
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_a_run_store_inside_the_repository_stays_out_of_snapshots(repo: Path) -> None:
    """`store = ".piflow/runs.db"`: the database, its WAL, other runs' logs and worktrees are piflow's."""
    with RunStore.open(repo / ".piflow" / "runs.db") as store:
        new_run(store, RUN_ID)
        new_run(store, "earlier-run")
        earlier = RunWorktrees("earlier-run", repo, store.run_dir("earlier-run"), store)
        earlier.ensure("a")
        write(store.run_dir("earlier-run") / "worker.log", "log\n")
        worktrees = RunWorktrees(RUN_ID, repo, store.run_dir(RUN_ID), store)

        record, _ = worktrees.ensure("a")

        assert git(repo, "ls-tree", "-r", "--name-only", record.base).split() == [
            ".gitignore", "README.md", "obsolete.txt", "src/app.py"
        ]
        assert not (Path(record.path) / ".piflow").exists()


# -- the engine's entry points -----------------------------------------------------------------
async def test_async_wrappers(worktrees: RunWorktrees) -> None:
    record, created = await worktrees.ensure_async("a")
    write(Path(record.path) / "x.txt", "x\n")

    assert created
    assert await worktrees.commit_async("a") is not None
    assert await worktrees.changed_async() == [record]
    await worktrees.remove_all_async()
    assert not Path(record.path).exists()
