"""`piflow check PATH...`: lint workflow scripts like CI linters do (text, JSON or SARIF output).

Exit codes: 0 clean (warnings allowed), 1 at least one error-severity finding, 2 a usage or
configuration error (missing path, unreadable capabilities, broken pi configuration).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from piflow.analysis.analyze import analyze
from piflow.analysis.capabilities import Capabilities
from piflow.analysis.dialects import detect_dialect, dialect_names
from piflow.analysis.report import FileReport, format_json, format_sarif, format_text
from piflow.analysis.script_file import read_script_file, unreadable_script
from piflow.cli_errors import UsageError
from piflow.config.files import FileRefused
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.config.project import ProjectConfig

DEFAULT_GLOB: Final = "**/*.workflow.js"
ACORN_LOCATION: Final = re.compile(r"\(\d+:\d+\)$")
ACORN_NOTE: Final = (
    "Note: `file:line:column:` counts both from 1. A syntax message ending in `(line:column)` keeps the "
    "reference parser's exact words, and its column counts from 0."
)
EXIT_CLEAN: Final = 0
EXIT_FINDINGS: Final = 1
EXIT_USAGE: Final = 2


def register(commands: Any) -> None:
    """Add `check` to the `piflow` argument parser's subcommands."""
    check = commands.add_parser(
        "check",
        help="lint workflow scripts",
        description=f"Report every problem of workflow scripts (files, or directories searched for {DEFAULT_GLOB}). "
        "Text output is `file:line:column: severity CODE message`, line and column from 1, findings in file "
        "order; JSON and SARIF ranges are 0-based like the LSP's.",
    )
    check.add_argument("paths", nargs="+", metavar="PATH")
    check.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    check.add_argument(
        "--capabilities",
        metavar="FILE",
        help="JSON {models, tools, agentTypes, modelAliases?, knownModels?} instead of your pi configuration",
    )
    check.add_argument("--dialect", choices=dialect_names(), help="force a dialect (default: detect per file)")
    check.add_argument("--glob", default=DEFAULT_GLOB, help=f"pattern for directories (default {DEFAULT_GLOB})")
    check.add_argument(
        "--no-compile", action="store_true", help="skip the engine compile (faster; syntax messages approximate)"
    )
    check.set_defaults(handler=run_check)


def run_check(args: argparse.Namespace) -> int:
    try:
        files = collect_files(args.paths, args.glob)
        given = load_capabilities_file(args.capabilities) if args.capabilities else None
        reports = [
            check_file(
                path,
                given or project_capabilities(Path(path).resolve().parent),
                args.dialect,
                compile=not args.no_compile,
            )
            for path in files
        ]
    except UsageError as error:
        print(f"piflow check: {error}", file=sys.stderr)
        return EXIT_USAGE
    if args.format == "json":
        sys.stdout.write(format_json(reports))
    elif args.format == "sarif":
        from piflow import __version__

        sys.stdout.write(format_sarif(reports, __version__))
    else:
        sys.stdout.write(format_text(reports))
        if any(ACORN_LOCATION.search(f.message) for report in reports for f in report.findings):
            sys.stdout.write(ACORN_NOTE + "\n")
    errors = any(finding.severity == "error" for report in reports for finding in report.findings)
    return EXIT_FINDINGS if errors else EXIT_CLEAN


def collect_files(paths: list[str], pattern: str) -> list[str]:
    """Files as named, directories expanded with `pattern` (sorted, no duplicates)."""
    found: list[str] = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found.extend(str(item) for item in sorted(path.glob(pattern)) if item.is_file())
        elif path.exists():
            found.append(name)  # check_file says what is wrong with one that is not a regular file
        else:
            raise UsageError(f"no such file or directory: {name}")
    return list(dict.fromkeys(found))


def load_capabilities_file(path: str) -> Capabilities:
    """`--capabilities FILE`: the wire shape `{models, tools, agentTypes, modelAliases?, knownModels?}`."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UsageError(f"cannot read capabilities {path}: {error}") from None
    if not isinstance(data, dict):
        raise UsageError(f"capabilities {path} must be a JSON object")
    return Capabilities.from_json(data)


@cache
def project_capabilities(directory: Path) -> Capabilities:
    """What scripts in `directory` may reference, from pi's and piflow's configuration of its project."""
    from piflow import config
    from piflow.engine.extensions import installed_tool_names

    try:
        return Capabilities.from_config(config.load_config(directory), extension_tools=installed_tool_names())
    except WorkflowError as error:
        raise UsageError(f"configuration error: {error.message}") from None


@cache
def project_settings(directory: Path) -> ProjectConfig:
    """piflow's settings of the project holding `directory` (its `[dialects]` globs pick dialects)."""
    from piflow.config.project import load_project_config

    try:
        return load_project_config(directory)
    except WorkflowError as error:
        raise UsageError(f"configuration error: {error.message}") from None


def check_file(path: str, capabilities: Capabilities, dialect: str | None, *, compile: bool) -> FileReport:
    """A file's findings in reading order (line, then column), whatever order the rules found them in."""
    try:
        script = read_script_file(path)
    except (OSError, FileRefused) as error:
        raise UsageError(unreadable_script(path, error)) from None
    chosen = detect_dialect(script.data, dialect, path=path, project=project_settings(Path(path).resolve().parent))
    findings = script.findings() + analyze(script.text, capabilities, chosen.name, compile=compile)
    ordered = sorted(findings, key=lambda f: (f.range.start.line, f.range.start.character))
    return FileReport(path, chosen.name, tuple(ordered))
