"""piflow.toml and the user config: schema, errors with file and line, trust."""

from __future__ import annotations

from pathlib import Path

import pytest

from piflow.config.project import find_project_root, load_project_config
from piflow.errors import WorkflowError


@pytest.fixture
def user(tmp_path: Path) -> Path:
    return tmp_path / "home" / "config.toml"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src" / "flows").mkdir(parents=True)
    return root


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def config_error(start: Path, user: Path) -> str:
    with pytest.raises(WorkflowError) as caught:
        load_project_config(start, user_file=user)
    assert caught.value.code == "CONFIG_ERROR"
    return caught.value.message


def test_defaults_without_any_file(project: Path, user: Path) -> None:
    config = load_project_config(project, user_file=user)
    assert config.project_root == project.resolve()
    assert (config.backend, config.scripts, config.store, config.fixtures) == (
        "scripted",
        ("**/*.workflow.js",),
        None,
        None,
    )
    assert not config.trusted


def test_project_root_is_found_by_walking_up(project: Path, user: Path) -> None:
    write(project / "piflow.toml", '[piflow]\nbackend = "openai"\n')
    assert find_project_root(project / "src" / "flows") == project
    config = load_project_config(project / "src" / "flows" / "a.workflow.js", user_file=user)
    assert config.project_root == project and config.backend == "openai"


def test_all_keys_and_relative_paths(project: Path, user: Path) -> None:
    write(
        project / "piflow.toml",
        '[piflow]\nbackend = "pi"\nmodel = "openai/gpt:high"\n'
        'scripts = ["flows/*.js"]\nstore = ".piflow/runs"\n\n'
        '[backends.ollama]\nbackend = "openai"\n\n[scripted]\nfixtures = "fixtures.json"\n',
    )
    config = load_project_config(project, user_file=user)
    assert config.scripts == ("flows/*.js",) and config.model == "openai/gpt:high"
    assert config.store == project / ".piflow" / "runs"
    assert config.fixtures == project / "fixtures.json"
    assert config.backend_for("ollama") == "openai" and config.backend_for("anthropic") == "pi"


def test_project_file_overrides_user_file(project: Path, user: Path) -> None:
    write(
        user,
        '[piflow]\nbackend = "openai"\nstore = "/var/runs"\n'
        '[backends.a]\nbackend = "pi"\n[backends.b]\nbackend = "pi"\n',
    )
    write(project / "piflow.toml", '[piflow]\nbackend = "scripted"\n[backends.b]\nbackend = "openai"\n')
    config = load_project_config(project, user_file=user)
    assert config.backend == "scripted" and config.store == Path("/var/runs")
    assert config.provider_backends == {"a": "pi", "b": "openai"}


def test_unknown_key_reports_file_and_line(project: Path, user: Path) -> None:
    path = write(project / "piflow.toml", '# settings\n[piflow]\nbackend = "openai"\ncolour = "blue"\n')
    assert config_error(project, user) == f"{path}:4: unknown key piflow.colour"


def test_unknown_table_reports_its_header_line(project: Path, user: Path) -> None:
    path = write(project / "piflow.toml", '[piflow]\nbackend = "openai"\n\n[engine]\nfast = true\n')
    assert config_error(project, user) == f"{path}:4: unknown key engine"


def test_wrong_backend_value_reports_the_key_line(project: Path, user: Path) -> None:
    path = write(
        project / "piflow.toml", '[scripted]\nfixtures = "f"\n\n[backends.openai]\nbackend = "gpt"\n'
    )
    assert (
        config_error(project, user)
        == f'{path}:5: backends.openai.backend must be one of "scripted", "openai", "pi"'
    )


def test_dotted_keys_are_located(project: Path, user: Path) -> None:
    path = write(project / "piflow.toml", 'piflow.scripts = "*.js"\n')
    assert config_error(project, user) == f"{path}:1: piflow.scripts: input should be a valid list"


def test_toml_syntax_error_reports_its_line(project: Path, user: Path) -> None:
    path = write(project / "piflow.toml", '[piflow]\nbackend = "openai"\nstore = \n')
    message = config_error(project, user)
    assert message.startswith(f"{path}:3: invalid TOML: ")


def test_user_config_errors_name_the_user_file(project: Path, user: Path) -> None:
    write(user, "[piflow]\ntrust_project = 1\n")
    assert config_error(project, user) == f"{user}:2: piflow.trust_project: input should be a valid boolean"


def test_projects_cannot_list_trusted_projects(project: Path, user: Path) -> None:
    path = write(project / "piflow.toml", 'trusted_projects = ["/"]\n')
    assert (
        config_error(project, user)
        == f"{path}:1: trusted_projects belongs in the user config, not in piflow.toml"
    )


# --- trust ------------------------------------------------------------------------------------


def test_project_is_untrusted_by_default(project: Path, user: Path) -> None:
    write(project / "piflow.toml", "[piflow]\n")
    assert not load_project_config(project, user_file=user).trusted


def test_project_can_opt_in_with_trust_project(project: Path, user: Path) -> None:
    write(project / "piflow.toml", "[piflow]\ntrust_project = true\n")
    config = load_project_config(project, user_file=user)
    assert config.trusted and "trust_project = true" in config.trust_reason


def test_user_trusted_projects_list(project: Path, user: Path) -> None:
    write(user, f'trusted_projects = ["{project}"]\n')
    write(project / "piflow.toml", "[piflow]\ntrust_project = false\n")
    assert load_project_config(project / "src", user_file=user).trusted


def test_user_default_applies_when_the_project_is_silent(project: Path, user: Path) -> None:
    write(user, "[piflow]\ntrust_project = true\n")
    assert load_project_config(project, user_file=user).trusted
    write(project / "piflow.toml", "[piflow]\ntrust_project = false\n")
    assert not load_project_config(project, user_file=user).trusted


def test_trusted_project_entries_must_be_absolute(project: Path, user: Path) -> None:
    write(user, '\ntrusted_projects = ["repo"]\n')
    assert config_error(project, user) == f"{user}:2: trusted_projects entries must be absolute paths"
