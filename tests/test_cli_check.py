"""`piflow check`: exit codes, the text, JSON and SARIF reports, and the bundled examples."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from piflow.cli import main
from piflow.cli_check import ACORN_NOTE

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CAPABILITIES = {"models": ["openai/gpt"], "tools": ["read"], "agentTypes": ["reviewer"]}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "caps.json").write_text(json.dumps(CAPABILITIES), encoding="utf-8")
    (tmp_path / "good.workflow.js").write_text('return agent("x", { role: "reviewer" });\n', encoding="utf-8")
    nested = tmp_path / "nested"
    nested.mkdir()
    (nested / "bad.workflow.js").write_text('agent("x", { model: "openai/nope" });\nconst y = ;\n', encoding="utf-8")
    (nested / "ignored.js").write_text("const y = ;\n", encoding="utf-8")
    return tmp_path


def run_check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["check", *args])
    return code, capsys.readouterr().out


def test_clean_file_exits_zero(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_check(capsys, str(workspace / "good.workflow.js"), "--capabilities", str(workspace / "caps.json"))
    assert code == 0
    assert out == "No problems found in 1 file.\n"


def test_directory_findings_exit_one_with_text_lines(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_check(capsys, str(workspace), "--capabilities", str(workspace / "caps.json"))
    assert code == 1
    bad = workspace / "nested" / "bad.workflow.js"
    assert out.splitlines() == [
        f"{bad}:1:21: error UNKNOWN_MODEL Unknown model: openai/nope",
        f"{bad}:2:11: error INVALID_SYNTAX Invalid workflow syntax: Unexpected token (2:10)",
        "2 errors in 2 files.",
        ACORN_NOTE,
    ]


def test_findings_are_listed_in_file_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "order.workflow.js"
    # The rules find the bad thinking level and the empty label before the unknown model.
    script.write_text('await agent("a", { model: "openai/nope", thinking: "loud" });\n'
                      'return await agent("b", { label: "" });\n', encoding="utf-8")
    caps = tmp_path / "caps.json"
    caps.write_text(json.dumps(CAPABILITIES), encoding="utf-8")
    code, out = run_check(capsys, str(script), "--capabilities", str(caps), "--no-compile")
    assert code == 1
    locations = [line.split(": ")[0] for line in out.splitlines()[:-1]]
    assert locations == [f"{script}:1:27", f"{script}:1:52", f"{script}:2:34"]
    assert "Note:" not in out  # no syntax message, no note about its location


def test_json_report(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_check(capsys, str(workspace), "--capabilities", str(workspace / "caps.json"), "--format", "json")
    report = json.loads(out)
    assert code == 1
    assert [Path(item["path"]).name for item in report["files"]] == ["good.workflow.js", "bad.workflow.js"]
    assert report["files"][0]["findings"] == []
    finding = report["files"][1]["findings"][0]
    assert finding["code"] == "UNKNOWN_MODEL"
    assert finding["range"]["start"] == {"line": 0, "character": 20}
    assert report["summary"]["error"] == 2


def test_sarif_report(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_check(capsys, str(workspace), "--capabilities", str(workspace / "caps.json"), "--format", "sarif")
    log = json.loads(out)
    assert code == 1 and log["version"] == "2.1.0"
    run = log["runs"][0]
    assert run["tool"]["driver"]["name"] == "piflow"
    rule_ids = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    result = run["results"][0]
    assert result["ruleId"] == "UNKNOWN_MODEL" and rule_ids[result["ruleIndex"]] == "UNKNOWN_MODEL"
    assert result["level"] == "error"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 1, "startColumn": 21, "endLine": 1, "endColumn": 34}


def test_usage_errors_exit_two(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(workspace / "missing.workflow.js")]) == 2
    (workspace / "broken.json").write_text("{", encoding="utf-8")
    assert main(["check", str(workspace), "--capabilities", str(workspace / "broken.json")]) == 2
    assert main(["check"]) == 2
    assert main(["check", str(workspace), "--format", "xml"]) == 2


def test_examples_are_clean(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run_check(capsys, str(EXAMPLES), "--capabilities", str(EXAMPLES / "capabilities.json"))
    scripts = len(list(EXAMPLES.glob("*.workflow.js")))
    assert scripts >= 7  # both dialects' examples, all clean
    assert (code, out) == (0, f"No problems found in {scripts} files.\n")


def test_real_subprocess(workspace: Path) -> None:
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "piflow",
            "check",
            str(workspace / "nested"),
            "--capabilities",
            str(workspace / "caps.json"),
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=workspace,
    )
    assert completed.returncode == 1
    assert completed.stdout.splitlines()[-2:] == ["2 errors in 1 file.", ACORN_NOTE]
