"""Role files (spec E): strict YAML 1.2 frontmatter and loading global and project roles."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from piflow.config.roles import load_roles, parse_role_markdown
from piflow.errors import WorkflowError


def role(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_yaml_1_2_keeps_off_and_yes_as_strings() -> None:
    parsed = parse_role_markdown("---\nthinking: off\ndescription: yes\n---\nBody", strict=True)
    assert (parsed.thinking, parsed.description, parsed.prompt) == ("off", "yes", "Body")


def test_dates_stay_strings_as_in_the_yaml_core_schema() -> None:
    parsed = parse_role_markdown("---\ndescription: 2024-01-01\n---\nx", strict=True)
    assert parsed.description == "2024-01-01"


def test_non_string_thinking_names_its_javascript_type() -> None:
    with pytest.raises(WorkflowError, match=r"^Invalid role thinking level: boolean$"):
        parse_role_markdown("---\nthinking: true\n---\nx", strict=True)


def test_crlf_role_is_normalised_when_strict() -> None:
    parsed = parse_role_markdown("---\r\nmodel: a/b\r\n---\r\nbody\r\n", strict=True)
    assert (parsed.model, parsed.prompt) == ("a/b", "body")


def test_yaml_errors_keep_the_reference_prefix_and_code() -> None:
    with pytest.raises(WorkflowError) as caught:
        parse_role_markdown("---\nmodel: 'open\n---\nx", strict=True)
    assert caught.value.code == "INVALID_METADATA"
    assert caught.value.message.startswith("Invalid role frontmatter: ")


def test_role_extension_paths_resolve_next_to_the_role_file(tmp_path: Path) -> None:
    path = role(tmp_path / "roles", "r", "---\ndisabledAgentResources:\n  extensions: [./e.ts]\n---\nx")
    parsed = parse_role_markdown(path.read_text(encoding="utf-8"), True, str(path))
    assert parsed.disabled_agent_resources is not None
    assert parsed.disabled_agent_resources.extensions == (str(tmp_path / "roles" / "e.ts"),)


def test_project_roles_override_global_roles_and_are_marked(tmp_path: Path) -> None:
    global_dir, project_dir = tmp_path / "global", tmp_path / "project"
    role(global_dir, "reviewer", "---\nmodel: openai/gpt\n---\nGlobal")
    role(global_dir, "scout", "Scout")
    override = role(project_dir, "reviewer", "---\nmodel: anthropic/opus\n---\nProject")
    roles = load_roles(global_dir, project_dir)
    assert roles.names == ["reviewer", "scout"]
    assert roles.roles["reviewer"].model == "anthropic/opus"
    assert roles.paths["reviewer"] == override
    assert roles.project_names == frozenset({"reviewer"})
    assert list(roles.project_roles) == ["reviewer"]


def test_untrusted_project_roles_are_not_read(tmp_path: Path) -> None:
    role(tmp_path / "global", "a", "A")
    role(tmp_path / "project", "b", "---\ntools: read\n---\nbroken")
    assert load_roles(tmp_path / "global", None).names == ["a"]


def test_one_malformed_role_file_fails_the_whole_load(tmp_path: Path) -> None:
    role(tmp_path / "global", "good", "fine")
    role(tmp_path / "global", "bad", "---\ntools: read\n---\nx")
    with pytest.raises(WorkflowError) as caught:
        load_roles(tmp_path / "global")
    assert (caught.value.code, caught.value.message) == (
        "INVALID_METADATA",
        "Role tools must be an array of non-empty strings",
    )


def test_only_regular_markdown_files_are_roles(tmp_path: Path) -> None:
    directory = tmp_path / "roles"
    role(directory, "real", "Real")
    (directory / "notes.txt").write_text("x", encoding="utf-8")
    (directory / "dir.md").mkdir()
    (directory / "link.md").symlink_to(directory / "real.md")
    (directory / ".md").write_text("hidden", encoding="utf-8")
    assert load_roles(directory).names == ["real"]


def test_missing_role_directories_give_no_roles(tmp_path: Path) -> None:
    roles = load_roles(tmp_path / "missing", tmp_path / "also-missing")
    assert roles.names == [] and roles.to_json() == {}


def test_roles_load_in_name_order(tmp_path: Path) -> None:
    for name in ("zeta", "alpha", "mid"):
        role(tmp_path / "roles", name, name)
    assert load_roles(tmp_path / "roles").names == ["alpha", "mid", "zeta"]


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet="-:\n[]{}'\"&*!|>%@`#?,. abtoolsmdelhink\t\r~0123456789\\\ufeff", max_size=80),
    st.booleans(),
)
def test_malformed_role_files_only_raise_workflow_errors(body: str, strict: bool) -> None:
    for content in (body, f"---\n{body}\n---\nbody"):
        try:
            parse_role_markdown(content, strict, "/roles/x.md")
        except WorkflowError as error:
            assert error.code == "INVALID_METADATA"


def test_deeply_nested_frontmatter_is_an_invalid_metadata_error() -> None:
    with pytest.raises(WorkflowError, match=r"^Invalid role frontmatter: "):
        parse_role_markdown("---\n" + "[" * 5000 + "\n---\nx", strict=True)
