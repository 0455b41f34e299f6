"""`withWorktree` scopes run their agents in real git worktrees of the launch repository (spec A.8)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from engine_support import finished, wait_for, write_fixtures

from piflow.engine import events
from piflow.engine.engine import Engine, LaunchRequest
from piflow.engine.store import RunStore


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


async def test_scoped_agents_get_a_worktree_and_the_repo_is_untouched(
    engine: Engine, launch, project: Path, store: RunStore
) -> None:
    git(project, "init", "-q", "-b", "main")
    git(project, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "init")
    (project / "draft.txt").write_text("uncommitted work")
    status_before = git(project, "status", "--porcelain")
    created: list[dict[str, str]] = []
    engine.bus.subscribe(lambda e: created.append(e.payload) if e.type == events.WORKTREE_CREATED else None)
    script = """
    const shared = await withWorktree("feature", async () => [await agent("a"), await agent("b")]);
    const outside = await agent("c");
    return {shared, outside};
    """
    run_id = await launch(script)
    record = await finished(engine, run_id)
    assert record.state == "completed"
    assert len(created) == 1 and created[0]["owner"] == "worktree/named/feature"
    [worktree] = store.worktrees(run_id)
    assert (Path(worktree.path) / "draft.txt").read_text() == "uncommitted work"
    assert worktree.branch.startswith(f"piflow/{run_id}/")
    agents = store.agents(run_id)
    assert [a.worktree_owner for a in agents] == ["worktree/named/feature"] * 2 + [None]
    assert git(project, "status", "--porcelain") == status_before
    assert git(project, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"


async def test_worktree_outside_a_repository_fails_the_agent(engine: Engine, launch) -> None:
    run_id = await launch('try { await withWorktree(() => agent("x")) } catch (e) { return [e.code, e.message] }')
    record = await finished(engine, run_id)
    assert record.result == ["WORKTREE_FAILED", "launch cwd is outside the repository"]


SNAPSHOT_FAILS = """
return await withWorktree("fix", async () => {
  await agent("look", { label: "first" });
  await checkpoint({ name: "lock", prompt: "the test locks the index", context: {} });
  try { await agent("change", { label: "second" }) } catch (e) { return [e.code, e.message] }
  return "no error";
});
"""


async def _with_a_failing_snapshot(engine: Engine, launch, project: Path, store: RunStore, second: dict) -> list[str]:
    """Run SNAPSHOT_FAILS with the worktree's index locked before the second agent: its attempt
    cannot be committed. What the script caught."""
    git(project, "init", "-q", "-b", "main")
    git(project, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "init")
    fixtures = write_fixtures(project, {"responses": [{"match": {"label": "first"}, "text": "ok"},
                                                      {"match": {"label": "second"}, **second}]})
    run_id = await launch(SNAPSHOT_FAILS, fixtures=fixtures)
    await wait_for(lambda: store.awaiting_checkpoints(run_id))
    [worktree] = store.worktrees(run_id)
    index = git(Path(worktree.path), "rev-parse", "--path-format=absolute", "--git-path", "index").strip()
    Path(index + ".lock").touch()
    engine.respond(run_id, name="lock", approved=True)
    record = await finished(engine, run_id)
    assert record.state == "completed"
    result: list[str] = record.result
    return result


async def test_a_failed_snapshot_never_masks_the_agents_own_failure(
    engine: Engine, launch, project: Path, store: RunStore
) -> None:
    caught = await _with_a_failing_snapshot(
        engine, launch, project, store, {"fail": {"code": "AGENT_FAILED", "message": "the tests failed"}}
    )
    assert caught == ["AGENT_FAILED", "the tests failed"]


async def test_a_failed_snapshot_fails_an_attempt_that_succeeded(
    engine: Engine, launch, project: Path, store: RunStore
) -> None:
    code, message = await _with_a_failing_snapshot(engine, launch, project, store, {"text": "changed"})
    assert code == "WORKTREE_FAILED" and message.startswith("git add failed: fatal: Unable to create")


async def test_a_store_inside_the_repository_works_with_worktrees(project: Path) -> None:
    """`store = ".piflow/runs.db"`: runs get worktrees, and no snapshot carries the store, its logs or
    an earlier run's worktrees."""
    git(project, "init", "-q", "-b", "main")
    (project / "app.py").write_text("print('app')\n")
    git(project, "add", "app.py")
    git(project, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "init")
    with RunStore.open(project / ".piflow" / "runs.db") as store:
        async with Engine(store) as engine:
            bases = []
            for _ in range(2):
                run_id = await engine.launch(LaunchRequest(
                    script='return await withWorktree("w", () => agent("x"))', cwd=str(project)))
                assert (await finished(engine, run_id)).state == "completed"
                [worktree] = store.worktrees(run_id)
                assert Path(worktree.path).is_relative_to(project / ".piflow" / "runs" / run_id)
                bases.append(worktree.base)
    for base in bases:
        assert git(project, "ls-tree", "-r", "--name-only", base).split() == ["app.py"]
