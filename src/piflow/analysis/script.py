"""A script's parts as pi sees them: the optional `export const meta` header and the body it runs."""

from __future__ import annotations

from piflow.analysis.document import ScriptDocument


def split_meta(script: str) -> tuple[str, str]:
    """`(header, body)`: the header statement's source (empty when there is none) and the body.

    The body is everything after the header with leading whitespace removed (spec A.1); without
    a header it is the whole script.
    """
    document = ScriptDocument(script)
    header = document.header
    if header is None:
        return "", script
    data = document.data
    return data[header.start : header.end].decode("utf-8", "surrogatepass"), document.body_text
