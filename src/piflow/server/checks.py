"""The findings of one document version (computed in a worker thread).

Scripts get every finding of `analyze` (the engine compile too, on open and save), plus one
finding per broken configuration file of their project, since a launch would stop on it.
Configuration files get the findings of their loaders.
"""

from __future__ import annotations

from pathlib import Path

from piflow.analysis.analyze import analyze_document
from piflow.analysis.document import ScriptDocument
from piflow.analysis.findings import Finding
from piflow.server import config_files
from piflow.server.snapshot import Buffer, DocumentKind, Snapshot


def findings(snapshot: Snapshot, buffer: Buffer, *, compile: bool) -> list[Finding]:
    """The findings of a document version, by what the document is."""
    if snapshot.kind is DocumentKind.SCRIPT:
        assert isinstance(buffer, ScriptDocument)
        found = analyze_document(buffer, snapshot.project.capabilities, snapshot.dialect, compile)
        return [*found, *_project_problems(snapshot)]
    path = _path(snapshot.uri)
    index = snapshot.index
    if path is None:
        return []
    if snapshot.kind is DocumentKind.ROLE:
        return config_files.role_findings(index, path)
    if snapshot.kind is DocumentKind.SETTINGS:
        return config_files.settings_findings(index, path, config_files.saved_text_matches(path, index))
    if snapshot.kind is DocumentKind.PIFLOW_TOML:
        return config_files.piflow_toml_findings(index, path, config_files.saved_text_matches(path, index))
    if snapshot.kind is DocumentKind.MODELS:
        return config_files.models_findings(index, path, config_files.saved_text_matches(path, index))
    return []


def _project_problems(snapshot: Snapshot) -> list[Finding]:
    """A broken settings, role or registry file stops every launch: say so on the script's first line."""
    if not snapshot.project.problems:
        return []
    index = snapshot.index
    span = index.range(0, index.offset_at(0, 1 << 30))
    return [
        Finding(problem.code, f"Configuration problem (every run of this project fails): {problem.message}",
                "error", span)
        for problem in snapshot.project.problems
    ]


def _path(uri: str) -> Path | None:
    from pygls.uris import to_fs_path

    path = to_fs_path(uri)
    return Path(path) if path else None
