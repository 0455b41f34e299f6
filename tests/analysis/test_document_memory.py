"""What an open document keeps is what its next analysis needs: parsers are shared between documents
(one thread at a time each), and statement facts can be released without changing any finding."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from piflow import Capabilities, analyze
from piflow.analysis import ScriptDocument, analyze_document

CAPS = Capabilities.create(models=["openai/gpt"], tools=["read"], agent_types=["reviewer"])


def script(n: int) -> str:
    return "".join(
        f'const r{n}_{i} = await agent("task {i}", {{ model: "openai/gpt{"x" * (i % 2)}", tools: ["read"] }});\n'
        f"await parallel(\"p{i}\", {{ a: () => agent(prompt(\"{{x}}\", {{ x: {i} }}), {{ role: \"reviewr\" }}) }});\n"
        for i in range(n % 5 + 3)
    )


def test_documents_parsed_and_edited_in_parallel_threads_get_their_own_findings() -> None:
    texts = [script(n) for n in range(12)]
    expected = [analyze(text + "const late = 1;\n", CAPS) for text in texts]

    def open_and_edit(text: str) -> list[object]:
        document = ScriptDocument(text)
        analyze_document(document, CAPS)
        line = document.index.line_count - 1
        document.apply_change(line, 0, line, 0, "const late = 1;\n")  # an incremental re-parse
        return list(analyze_document(document, CAPS))

    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            assert list(pool.map(open_and_edit, texts)) == expected


def test_a_document_that_released_its_facts_finds_the_same_after_an_edit() -> None:
    document = ScriptDocument(script(4))
    before = analyze_document(document, CAPS)
    document.release()
    assert analyze_document(document, CAPS) == before
    document.release()
    document.apply_change(0, 0, 0, 0, "await agent(1);\n")
    assert analyze_document(document, CAPS) == analyze(document.text, CAPS)
