"""Running git for the engine: explicit arguments, a neutral environment, failures as WORKTREE_FAILED.

Git is driven through its command line (no library) so the user's own git, config, filters and
object formats apply exactly as in their shell. What must *not* apply is anything that runs the
user's code or asks for input behind the engine's back: hooks (`core.hooksPath=/dev/null`), an
fsmonitor daemon or hook (`core.fsmonitor=false`), signing prompts (`commit.gpgsign=false`) and
credential prompts (`GIT_TERMINAL_PROMPT=0`, no stdin).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Final

from piflow.errors import WorkflowError

_CONFIG: Final = (
    *("-c", "core.hooksPath=/dev/null"),
    *("-c", "commit.gpgsign=false"),
    *("-c", "core.fsmonitor=false"),
)

# What `git rev-parse --local-env-vars` lists: variables that point git at one particular
# repository or index. Inherited from a parent git (a hook, `git rebase -x`) they would make
# every command below act on that repository instead of the one named by `cwd`.
_REPOSITORY_VARIABLES: Final = frozenset(
    {
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_CONFIG",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
        "GIT_OBJECT_DIRECTORY",
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_IMPLICIT_WORK_TREE",
        "GIT_GRAFT_FILE",
        "GIT_INDEX_FILE",
        "GIT_NO_REPLACE_OBJECTS",
        "GIT_REPLACE_REF_BASE",
        "GIT_PREFIX",
        "GIT_INTERNAL_SUPER_PREFIX",
        "GIT_SHALLOW_FILE",
        "GIT_COMMON_DIR",
    }
)


def git_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The process environment minus repository pointers, in the C locale, never prompting.

    The C locale keeps git's messages in English (they become WORKTREE_FAILED messages).
    """
    env = {name: value for name, value in os.environ.items() if name not in _REPOSITORY_VARIABLES}
    env.update({"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"})
    if extra:
        env.update(extra)
    return env


def run_git(
    cwd: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
    ok: Collection[int] = (0,),
) -> subprocess.CompletedProcess[str]:
    """Run `git <args>` in `cwd`; an exit status outside `ok` raises WORKTREE_FAILED.

    `env` adds to (not replaces) the neutral environment. Output is decoded as UTF-8 with
    surrogate escapes, so paths that are not UTF-8 survive a round trip back to git.
    """
    try:
        completed = subprocess.run(
            ["git", *_CONFIG, *args],
            cwd=cwd,
            env=git_environment(env),
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            encoding="utf-8",
            errors="surrogateescape",
            check=False,
        )
    except OSError as exc:  # git missing, or `cwd` gone
        raise WorkflowError("WORKTREE_FAILED", f"{_command(args)} failed: {exc}") from exc
    if completed.returncode not in ok:
        raise WorkflowError("WORKTREE_FAILED", failure_message(args, completed))
    return completed


def git_output(cwd: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    """The stripped standard output of a git command that must succeed."""
    return run_git(cwd, *args, env=env).stdout.strip()


def failure_message(args: Sequence[str], completed: subprocess.CompletedProcess[str]) -> str:
    """`git <subcommand> failed: <git's first line>`, hints dropped.

    Git's first line names the cause ("fatal: cannot lock ref ..."); what follows is advice
    for an interactive user, too long for a run's one-line error.
    """
    lines = (line.strip() for line in completed.stderr.splitlines())
    cause = next((line for line in lines if line and not line.startswith("hint:")), None)
    return f"{_command(args)} failed: {cause or f'exit status {completed.returncode}'}"


def _command(args: Sequence[str]) -> str:
    """`git worktree add` rather than just `git worktree`: which step failed matters."""
    return "git " + " ".join(args[:2] if args[0] == "worktree" else args[:1])
