"""One truth for "will this run?": what `piflow check` passes, `piflow run`'s launch validation accepts.

Scripts and whole configurations (models.json with and without keys, pi's aliases and piflow.toml's,
global and project roles, trust, backends and per-provider backends) are generated; each script is
checked with the project's capabilities exactly as `piflow check` computes them and launched through
the engine's own validation for the same configuration. A check without errors must launch; a refused
launch must have been an error of the same code in the check.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from piflow.analysis.analyze import analyze
from piflow.analysis.capabilities import Capabilities
from piflow.analysis.launch import validate_workflow_launch
from piflow.config import load_config
from piflow.engine.environment import environment_from_config
from piflow.errors import WorkflowError

PROVIDERS = ("openai", "anthropic", "local")
MODEL_IDS = ("gpt", "gpt-mini", "sonnet")
TOOLS = ("read", "bash", "grep", "nope")
THINKING = ("low", "high", "turbo")


@dataclass(frozen=True)
class Provider:
    name: str
    key: str | None  # None, "$VAR", "VAR" (a variable name) or a literal
    key_set: bool
    loopback: bool
    models: tuple[str, ...]


@dataclass(frozen=True)
class Role:
    name: str
    model: str | None
    tools: tuple[str, ...] | None
    in_project: bool


@dataclass(frozen=True)
class Setup:
    registry: tuple[Provider, ...] | None
    pi_aliases: dict[str, str]
    toml_aliases: dict[str, str]
    roles: tuple[Role, ...]
    trusted: bool
    backend: str
    provider_backends: dict[str, str]
    run_backend: str | None


model_refs = st.one_of(
    st.builds(lambda p, m: f"{p}/{m}", st.sampled_from(PROVIDERS), st.sampled_from(MODEL_IDS)),
    st.sampled_from(MODEL_IDS),  # bare ids
    st.sampled_from(("fast", "smart", "missing")),  # aliases, defined or not
    st.builds(lambda p, m, t: f"{p}/{m}:{t}", st.sampled_from(PROVIDERS), st.sampled_from(MODEL_IDS),
              st.sampled_from(THINKING)),
    st.sampled_from(("not a model", "openai/")),
)
alias_maps = st.dictionaries(
    st.sampled_from(("fast", "smart")),
    st.builds(lambda p, m, t: f"{p}/{m}{t}", st.sampled_from(PROVIDERS), st.sampled_from(MODEL_IDS),
              st.sampled_from(("", ":high"))),
    max_size=2,
)
providers = st.builds(
    Provider,
    name=st.sampled_from(PROVIDERS),
    key=st.sampled_from((None, "$KEY_A", "KEY_B", "sk-literal")),
    key_set=st.booleans(),
    loopback=st.booleans(),
    models=st.lists(st.sampled_from(MODEL_IDS), max_size=3, unique=True).map(tuple),
)
roles = st.builds(
    Role,
    name=st.sampled_from(("reviewer", "scout", "writer")),
    model=st.one_of(st.none(), model_refs),
    tools=st.one_of(st.none(), st.lists(st.sampled_from(TOOLS), max_size=3, unique=True).map(tuple)),
    in_project=st.booleans(),
)
setups = st.builds(
    Setup,
    registry=st.one_of(st.none(), st.lists(providers, max_size=3, unique_by=lambda p: p.name).map(tuple)),
    pi_aliases=alias_maps,
    toml_aliases=alias_maps,
    roles=st.lists(roles, max_size=3, unique_by=lambda r: (r.name, r.in_project)).map(tuple),
    trusted=st.booleans(),
    backend=st.sampled_from(("scripted", "openai", "pi")),
    provider_backends=st.dictionaries(st.sampled_from(PROVIDERS), st.sampled_from(("scripted", "openai")), max_size=2),
    run_backend=st.sampled_from((None, "scripted", "openai")),
)


@st.composite
def agent_options(draw: st.DrawFn) -> str:
    """Options of one call; a role mostly comes alone (beside model/thinking/tools it is a conflict)."""
    role = draw(st.sampled_from((None, None, None, "reviewer", "scout", "writer", "ghost", "dynamic")))
    parts = []
    if role == "dynamic":
        parts.append("role: args.role")
    elif role is not None:
        parts.append(f"role: {json.dumps(role)}")
    alone = role is not None and draw(st.integers(0, 5)) > 0
    if not alone and draw(st.booleans()):
        parts.append(f"model: {json.dumps(draw(model_refs))}")
    if not alone and draw(st.integers(0, 3)) == 0:
        parts.append(f"thinking: {json.dumps(draw(st.sampled_from(('low', 'medium', 'high', 'turbo'))))}")
    if not alone and draw(st.integers(0, 3)) == 0:
        parts.append(f"tools: {json.dumps(draw(st.lists(st.sampled_from(TOOLS), max_size=2)))}")
    return "{ " + ", ".join(parts) + " }"


@st.composite
def scripts(draw: st.DrawFn) -> str:
    calls = [f'agent("task {n}", {draw(agent_options())})' for n in range(draw(st.integers(1, 3)))]
    if draw(st.booleans()):
        branches = ", ".join(f"b{n}: () => {call}" for n, call in enumerate(calls))
        return f'phase("work");\nconst out = await parallel("fan", {{ {branches} }});\nreturn out;\n'
    return "".join(f"await {call};\n" for call in calls) + "return 1;\n"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def materialize(setup: Setup, root: Path) -> dict[str, str]:
    """Write the configuration's files under `root`; returns the environment to read them with."""
    environ = {"HOME": str(root / "home"), "PI_CODING_AGENT_DIR": str(root / "agent"),
               "XDG_CONFIG_HOME": str(root / "xdg")}
    agent, project = root / "agent", root / "project"
    workflows = agent / "pi-extensible-workflows"
    if setup.registry is not None:
        entries = {}
        for provider in setup.registry:
            entry: dict[str, object] = {
                "baseUrl": "http://127.0.0.1:9/v1" if provider.loopback else "https://api.example/v1",
                "api": "openai-completions",
                "models": [{"id": model} for model in provider.models],
            }
            if provider.key is not None:
                entry["apiKey"] = provider.key
            if provider.key_set:
                environ.update({"KEY_A": "a", "KEY_B": "b", f"{provider.name.upper()}_API_KEY": "k"})
            entries[provider.name] = entry
        write(agent / "models.json", json.dumps({"providers": entries}))
    if setup.pi_aliases:
        write(workflows / "settings.json", json.dumps({"modelAliases": setup.pi_aliases}))
    for role in setup.roles:
        front = []
        if role.model is not None:
            front.append(f"model: {json.dumps(role.model)}")
        if role.tools is not None:
            front.append(f"tools: {json.dumps(list(role.tools))}")
        base = project / ".pi" / "pi-extensible-workflows" if role.in_project else workflows
        write(base / "roles" / f"{role.name}.md", "---\n" + "\n".join(front) + "\n---\nDo the work.\n")
    toml = [f'[piflow]\nbackend = "{setup.backend}"\ntrust_project = {str(setup.trusted).lower()}\n']
    toml += [f'[backends.{name}]\nbackend = "{backend}"\n' for name, backend in setup.provider_backends.items()]
    if setup.toml_aliases:
        toml.append("[model_aliases]\n" + "".join(f'{k} = "{v}"\n' for k, v in setup.toml_aliases.items()))
    write(project / "piflow.toml", "\n".join(toml))
    return environ


def launch_error(script: str, setup: Setup, project: Path, environ: dict[str, str]) -> WorkflowError | None:
    config = load_config(project, environ)
    env = environment_from_config(config)
    env = env.with_backend(setup.run_backend or env.backend)
    try:
        validate_workflow_launch({"name": "generated", "script": script}, env.launch_context())
    except WorkflowError as error:
        return error
    return None


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setup=setups, script=scripts())
def test_a_script_check_passes_is_a_script_the_launch_accepts(setup: Setup, script: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        environ = materialize(setup, root)
        project = root / "project"
        config = load_config(project, environ)
        findings = analyze(script, Capabilities.from_config(config, backend=setup.run_backend), compile=True)
        errors = [finding for finding in findings if finding.severity == "error"]
        refused = launch_error(script, setup, project, environ)
    event(f"check errors: {bool(errors)}, launch: {refused.code if refused else 'accepted'}")
    if not errors:
        assert refused is None, f"check passed, launch refused: {refused}\n{script}"
    if refused is not None:
        assert refused.code in {finding.code for finding in errors}, (
            f"launch refused with {refused.code} ({refused.message}); check said {[f.to_json() for f in errors]}"
        )
