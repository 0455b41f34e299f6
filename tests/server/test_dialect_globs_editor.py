"""The editor decides a script's dialect as `piflow check` and `piflow run` do: a `[dialects]` glob
makes a file that uses neither the pragma nor `runs.*` a pi-subagents script for diagnostics,
hover, completion and the `▶ Run` lens, and the file is served even though `[piflow] scripts`
does not name it."""

from __future__ import annotations

from conftest import Workspace, open_document, pulled
from lsprotocol import types

TOML = '[piflow]\nbackend = "scripted"\n\n[dialects]\npi-subagents = ["fleet/**/*.js"]\n'
TEXT = "emit(NaN);\nconst seen = await state.get(\"seen\");\nreturn seen;\n"


async def test_a_glob_matched_file_gets_the_pi_subagents_features(start, workspace: Workspace) -> None:
    (workspace.project / "piflow.toml").write_text(TOML, encoding="utf-8")
    client = await start("vscode_1.95")
    uri = workspace.uri(workspace.write("fleet/nightly/count.js", TEXT))
    other = workspace.uri(workspace.write("count.workflow.js", TEXT))
    open_document(client, uri, TEXT)
    open_document(client, other, TEXT)
    document = types.TextDocumentIdentifier(uri)

    report = await pulled(client, uri)
    assert isinstance(report, types.RelatedFullDocumentDiagnosticReport)
    assert [(item.code, item.message) for item in report.items] == [
        ("SUBAGENTS_BOUNDARY", "emit must contain only finite JSON numbers.")
    ]
    elsewhere = await pulled(client, other)  # outside the glob: the default dialect, where emit is nothing
    assert isinstance(elsewhere, types.RelatedFullDocumentDiagnosticReport)
    assert [item.code for item in elsewhere.items if item.code == "SUBAGENTS_BOUNDARY"] == []

    hover = await client.text_document_hover_async(types.HoverParams(document, types.Position(0, 1)))
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert "emit(value: JSON)" in hover.contents.value
    assert await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(other),
                                                                    types.Position(0, 1))) is None

    completion = await client.text_document_completion_async(
        types.CompletionParams(document, types.Position(1, len("const seen = await state.")))
    )
    assert isinstance(completion, types.CompletionList)
    assert [item.label for item in completion.items] == ["get", "set"]

    lenses = await client.text_document_code_lens_async(types.CodeLensParams(document))
    assert lenses is not None and any(lens.command is not None and "Run" in lens.command.title for lens in lenses)
