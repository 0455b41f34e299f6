"""`withWorktree` scopes run their agents in real git worktrees of the launch repository (spec A.8)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from engine_support import finished

from piflow.engine import events
from piflow.engine.engine import Engine
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
