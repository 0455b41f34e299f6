"""What each attempt ran with, as `piflow show` tells it: model, thinking, tools, the effective
system prompt and the resource policy (spec J.3 `setup`, D, J.2), over the real CLI."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from isolation import isolated_environment

ROLE = """---
model: scripted/default
tools: [read, grep]
disabledAgentResources:
  skills: [deploy]
---
You review code and never edit it.
"""
SCRIPT = """const review = await agent("Review the change", { role: "reviewer", label: "review" });
const plain = await agent("Summarise", { label: "plain", model: "scripted/default" });
const fast = await agent("Quick look", { label: "fast", model: "scripted/default", thinking: "low" });
return { review, plain, fast };
"""


def _project(base: Path, launch_model: str) -> tuple[Path, dict[str, str]]:
    home, root = base / "home", base / "work" / "project"
    agent_dir = home / ".pi" / "agent"
    (agent_dir / "pi-extensible-workflows" / "roles").mkdir(parents=True)
    (agent_dir / "pi-extensible-workflows" / "roles" / "reviewer.md").write_text(ROLE)
    (agent_dir / "pi-extensible-workflows" / "settings.json").write_text(
        json.dumps({"disabledAgentResources": {"skills": ["release"]}}))
    root.mkdir(parents=True)
    (root / "piflow.toml").write_text(f'[piflow]\nbackend = "scripted"\nmodel = "{launch_model}"\n')
    (root / "audit.workflow.js").write_text(SCRIPT)
    return root, isolated_environment(base, home, agent_dir)


def _piflow(root: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "piflow", *args], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _setups(root: Path, env: dict[str, str], launch_model: str) -> tuple[dict[str, dict[str, Any]], str]:
    run_id = _piflow(root, env, "run", "audit.workflow.js").splitlines()[0]
    view = json.loads(_piflow(root, env, "show", run_id, "--json"))
    return {agent["label"]: agent["attemptList"][-1]["setup"] for agent in view["agentList"]}, run_id


def test_each_attempt_records_its_prompt_tools_model_thinking_and_policy(tmp_path: Path) -> None:
    root, env = _project(tmp_path, "scripted/default:high")
    setups, run_id = _setups(root, env, "scripted/default:high")
    review = setups["review"]
    assert review["model"] == "scripted/default" and review["tools"] == ["read", "grep"]
    assert review["systemPrompt"] == "You review code and never edit it."
    assert review["systemPromptSha256"] == hashlib.sha256(b"You review code and never edit it.").hexdigest()
    assert review["cwd"] == str(root)
    # the settings' policy and the role's own merge for the role's agents only
    assert review["disabledAgentResources"] == {"skills": ["release", "deploy"], "extensions": []}
    assert setups["plain"]["disabledAgentResources"] == {"skills": ["release"], "extensions": []}
    assert setups["plain"]["systemPrompt"] == ""
    text = _piflow(root, env, "show", run_id)
    assert ("     ran with: model scripted/default; thinking high; tools read, grep; system prompt "
            f"{review['systemPromptSha256'][:12]} (34 chars); disabled resources release, deploy") in text.splitlines()


def test_an_agent_naming_a_model_without_thinking_inherits_the_launching_level(tmp_path: Path) -> None:
    root, env = _project(tmp_path, "scripted/default:high")
    setups, _ = _setups(root, env, "scripted/default:high")
    assert setups["plain"]["thinking"] == "high"  # names a model, no level: the launching level
    assert setups["fast"]["thinking"] == "low"  # its own level wins
    assert setups["review"]["thinking"] == "high"  # the role fixes no level either


def test_without_a_launching_level_an_agent_runs_at_the_backends_default(tmp_path: Path) -> None:
    root, env = _project(tmp_path, "scripted/default")
    setups, _ = _setups(root, env, "scripted/default")
    assert setups["plain"]["thinking"] is None and setups["fast"]["thinking"] == "low"
