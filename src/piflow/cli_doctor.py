"""`piflow doctor`: what piflow sees of this machine and project, and what is missing.

Every check has a level: `ok` (present and usable), `info` (absent but optional: a fresh machine
has only these), `warning` (configured but not usable, such as a provider without its key) and
`error` (broken configuration, or a default backend that cannot run). Only errors fail the command.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Final, Literal

from piflow.config import PiflowConfig, load_config, root_tools
from piflow.config.availability import PI_BUILTIN_TOOLS
from piflow.config.paths import user_config_path
from piflow.config.pi_tools import PiToolList
from piflow.engine.environment import project_root, store_path
from piflow.errors import WorkflowError

Level = Literal["ok", "info", "warning", "error"]
MARKS: Final[dict[str, str]] = {"ok": "✓", "info": "·", "warning": "!", "error": "✗"}


def _check(level: Level, text: str) -> dict[str, Any]:
    """One finding; `ok` stays for clients that read only it (false for warnings and errors)."""
    return {"level": level, "ok": level in ("ok", "info"), "text": text}


def _file(label: str, path: Path, missing: str) -> dict[str, Any]:
    if path.exists():
        return _check("ok", f"{label}: {path}")
    return _check("info", f"{label}: {path} not found — {missing}")


def diagnose(cwd: str) -> dict[str, Any]:
    """Every check as data, so the text report and `--json` say the same."""
    config = load_config(cwd, tolerant=True)
    checks: list[dict[str, Any]] = []
    for problem in config.problems:
        checks.append(_check("error", f"{problem.code}: {problem.message}"))
    project = config.project
    checks.append(_check("ok", f"project root: {project.project_root}"))
    if project.project_file is not None:
        checks.append(_check("ok", f"piflow.toml: {project.project_file}"))
    else:
        checks.append(_check("info", f"piflow.toml: none in {project.project_root} or above — piflow's defaults apply"))
    checks.append(_file("user config", project.user_file or user_config_path(), "piflow's defaults apply"))
    if project.trusted:
        checks.append(_check("ok", f"project trusted: yes ({project.trust_reason})"))
    else:
        checks.append(_check(
            "info",
            f"project trusted: no ({project.trust_reason}) — its .pi/ settings, roles and agents are ignored; "
            "to trust it, "
            f"set `trust_project = true` under [piflow] in its piflow.toml, or add {project.project_root} to "
            f"trusted_projects in {user_config_path()}",
        ))
    checks.append(_file("agent dir", config.agent_dir, "pi is not set up here; piflow uses defaults"))
    checks.append(_file(
        "workflow settings", config.settings_path,
        f"defaults apply (concurrency {config.settings.concurrency}, no model aliases)",
    ))
    if config.settings_path.exists():
        checks.append(_check("ok", f"model aliases: {len(config.model_aliases)}, concurrency "
                                   f"{config.settings.concurrency}"))
    for name in config.roles.names:
        checks.append(_check("ok", f"role {name}: {config.roles.paths.get(name)}"))
    agents = _agents(config, checks)
    registry = config.registry
    if not registry.configured:
        checks.append(_check("info", f"model registry: {registry.path} not found — unknown models cannot be "
                                     "verified and only the scripted backend can answer"))
    if registry.pi_error is not None:
        checks.append(_check("error", "pi refuses this models.json and then ignores every model in it; pi says: "
                                      + registry.pi_error))
    models = []
    for provider in registry.providers.values():
        usable = registry.provider_available(provider.name)
        for model in provider.models:
            models.append({"model": model.ref, "provider": provider.name, "api": provider.api,
                           "baseUrl": redact_url(provider.base_url), "available": usable, "source": str(registry.path)})
        checks.append(_check("ok" if usable else "warning",
                             f"provider {provider.name} ({provider.api or 'no api'}, "
                             f"{redact_url(provider.base_url) or 'no baseUrl'}): "
                             + ("usable" if usable else "no API key (set it in models.json or the env)")))
    pi_command = os.environ.get("PIFLOW_PI_COMMAND") or shutil.which("pi")
    openai_ready = any(p.api == "openai-completions" and registry.provider_available(p.name)
                       for p in registry.providers.values())
    backends = {
        "scripted": _check("ok", "always available (answers from fixtures)"),
        "openai": _check("ok", "a usable provider with api openai-completions") if openai_ready
        else _check("info", "not configured: needs a provider with api \"openai-completions\" in models.json"),
        "pi": _check("ok", f"pi CLI: {pi_command}") if pi_command
        else _check("info", "not installed: npm install -g @earendil-works/pi-coding-agent"),
    }
    default = backends.get(project.backend)
    if default is not None and default["level"] != "ok":
        checks.append(_check("error", f"default backend {project.backend} cannot run: {default['text']}"))
    else:
        checks.append(_check("ok", f"default backend: {project.backend}"))
    checks.append(_file("run store", store_path(cwd), "the first run creates it"))
    pi_tools = _pi_tools(config, checks) if pi_command else None
    if not pi_command:
        checks.append(_check("info", f"pi tools: pi is not installed — checks on the pi backend assume its "
                                     f"built-ins ({', '.join(PI_BUILTIN_TOOLS)})"))
    tools = root_tools(project.backend, pi_tools=None if pi_tools is None else pi_tools.names)
    checks.append(_check("ok", f"root tools on {project.backend}: {', '.join(sorted(tools))}"))
    return {"checks": checks, "models": models, "backends": backends, "agents": agents}


def _pi_tools(config: PiflowConfig, checks: list[dict[str, Any]]) -> PiToolList | None:
    """Ask pi which tools it offers here (probed when the cache is stale) and say where each comes from."""
    import anyio

    from piflow.engine.backends.pi import current_pi_tools

    try:
        tools = anyio.run(current_pi_tools, config.agent_dir, config.project_root, config.resource_policy)
    except WorkflowError as error:
        checks.append(_check("warning", f"pi tools: {error.message} — checks on the pi backend assume its "
                                        f"built-ins ({', '.join(PI_BUILTIN_TOOLS)})"))
        return None
    builtin = [tool.name for tool in tools.tools if tool.source == "builtin"]
    checks.append(_check("ok", f"pi tools: built-in {', '.join(builtin) or 'none'}"))
    for tool in tools.tools:
        if tool.source != "builtin":
            checks.append(_check("ok", f"pi tool {tool.name}: extension {tool.path} ({tool.source})"))
    return tools


def _agents(config: PiflowConfig, checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """pi-subagents agents (the second dialect's children): each with where it comes from."""
    catalog = config.agent_catalog
    for problem in catalog.problems:
        checks.append(_check("warning", f"agent definitions: {problem}"))
    if not config.trusted:
        for directory in (config.project_root / ".pi" / "agents", config.project_root / ".agents"):
            if directory.is_dir():
                checks.append(_check("info", f"project agents in {directory} are ignored: the project is not trusted"))
    rows = []
    for name, agent in sorted(catalog.discovered.items()):
        rows.append({
            "name": name, "source": agent.source, "path": str(agent.path) if agent.path else None,
            "line": agent.line + 1, "disabled": name in catalog.disabled, "aliases": list(agent.aliases),
            "model": agent.model, "description": agent.description,
        })  # fmt: skip
    return rows


def _doctor(args: argparse.Namespace) -> int:
    report = diagnose(project_root(os.getcwd() if args.path is None else str(Path(args.path).resolve())))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for check in report["checks"]:
            print(f"{MARKS[check['level']]} {check['text']}")
        for name, check in report["backends"].items():
            print(f"{MARKS[check['level']]} backend {name}: {check['text']}")
        for model in report["models"]:
            state = "available" if model["available"] else "unavailable"
            print(f"  model {model['model']} — {state}, from {model['source']} ({model['baseUrl']})")
        for agent in report["agents"]:
            where = agent["source"] if agent["source"] == "builtin" else f"{agent['source']} {agent['path']}"
            marks = " — disabled by subagents.agentOverrides" if agent["disabled"] else ""
            aliases = f" (also {', '.join(agent['aliases'])})" if agent["aliases"] else ""
            print(f"  agent {agent['name']}{aliases} — {where}{marks}")
        print("(✓ usable · optional, not set up ! configured but not usable ✗ must be fixed)")
    return 1 if any(check["level"] == "error" for check in report["checks"]) else 0


def register(commands: Any) -> None:
    doctor = commands.add_parser("doctor", help="show configuration, models and backends piflow sees")
    doctor.add_argument("path", nargs="?")
    doctor.add_argument("--json", action="store_true")
    doctor.set_defaults(handler=_doctor)


_USERINFO: Final = re.compile(r"(?<=//)[^/?#]*@")


def redact_url(url: str | None) -> str | None:
    """`url` without the `user:password@` part a baseUrl may carry (doctor output gets pasted into issues)."""
    return None if url is None else _USERINFO.sub("***@", url, count=1)
