"""`piflow doctor`: what piflow sees of this machine and project, and what is missing."""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path
from typing import Any

from piflow.config import DEFAULT_ROOT_TOOLS, load_config
from piflow.engine.environment import project_root, store_path


def _check(ok: bool, text: str) -> dict[str, Any]:
    return {"ok": ok, "text": text}


def diagnose(cwd: str) -> dict[str, Any]:
    """Every check as data, so the text report and `--json` say the same."""
    config = load_config(cwd, tolerant=True)
    checks: list[dict[str, Any]] = []
    for problem in config.problems:
        checks.append(_check(False, f"{problem.code}: {problem.message}"))
    project = config.project
    checks.append(_check(True, f"project root: {project.project_root}"))
    checks.append(_check(True, f"piflow.toml: {project.project_file or '(none)'}; user config: "
                               f"{project.user_file or '(none)'}"))
    checks.append(_check(True, f"project trusted: {project.trusted} ({project.trust_reason})"))
    checks.append(_check(True, f"agent dir: {config.agent_dir}"))
    checks.append(_check(True, f"workflow settings: {config.settings_path} (concurrency "
                               f"{config.settings.concurrency}, {len(config.model_aliases)} model aliases)"))
    for name in config.roles.names:
        checks.append(_check(True, f"role {name}: {config.roles.paths.get(name)}"))
    registry = config.registry
    if not registry.configured:
        checks.append(_check(False, f"model registry: {registry.path} not found — unknown models cannot be "
                                    "verified and only the scripted backend can answer"))
    models = []
    for provider in registry.providers.values():
        usable = registry.provider_available(provider.name)
        for model in provider.models:
            models.append({"model": model.ref, "provider": provider.name, "api": provider.api,
                           "baseUrl": provider.base_url, "available": usable, "source": str(registry.path)})
        checks.append(_check(usable, f"provider {provider.name} ({provider.api or 'no api'}, "
                                     f"{provider.base_url or 'no baseUrl'}): "
                                     + ("usable" if usable else "no API key (set it in models.json or the env)")))
    pi_command = os.environ.get("PIFLOW_PI_COMMAND") or shutil.which("pi")
    openai_ready = any(p.api == "openai-completions" and registry.provider_available(p.name)
                       for p in registry.providers.values())
    backends = {
        "scripted": _check(True, "always available (answers from fixtures)"),
        "openai": _check(openai_ready, "a usable provider with api openai-completions" if openai_ready
                         else "needs a provider with api \"openai-completions\" in models.json"),
        "pi": _check(bool(pi_command), f"pi CLI: {pi_command}" if pi_command
                     else "pi CLI not found: npm install -g @earendil-works/pi-coding-agent"),
    }
    checks.append(_check(True, f"default backend: {project.backend}"))
    checks.append(_check(True, f"run store: {store_path(cwd)}"))
    checks.append(_check(True, f"root tools: {', '.join(DEFAULT_ROOT_TOOLS)}"))
    return {"checks": checks, "models": models, "backends": backends}


def _doctor(args: argparse.Namespace) -> int:
    report = diagnose(project_root(os.getcwd() if args.path is None else str(Path(args.path).resolve())))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for check in report["checks"]:
            print(f"{'✓' if check['ok'] else '!'} {check['text']}")
        for name, check in report["backends"].items():
            print(f"{'✓' if check['ok'] else '✗'} backend {name}: {check['text']}")
        for model in report["models"]:
            state = "available" if model["available"] else "unavailable"
            print(f"  model {model['model']} — {state}, from {model['source']} ({model['baseUrl']})")
    return 0 if all(c["ok"] for c in report["checks"]) else 1


def register(commands: Any) -> None:
    doctor = commands.add_parser("doctor", help="show configuration, models and backends piflow sees")
    doctor.add_argument("path", nargs="?")
    doctor.add_argument("--json", action="store_true")
    doctor.set_defaults(handler=_doctor)
