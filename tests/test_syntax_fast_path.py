"""The exact syntax check's fast path: acorn runs only when its wording can matter.

`syntax_check` accepts a text without running acorn when tree-sitter and the early-error walk found
nothing and QuickJS compiles the text natively as strict code. Acorn's strict-module grammar and
QuickJS's script grammar differ (HTML-like comments, `await` as an identifier, `new a?.b()`...), so
these tests run both paths over every corpus script, a fuzz corpus and the known differences, and
require the same verdict: the fast path never accepts what acorn rejects, nor what piflow's own body
compile rejects.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from conformance import CONFORMANCE_DIR
from piflow import Capabilities, WorkflowError, analyze, preflight
from piflow.analysis import ScriptDocument
from piflow.analysis.dialects import extensible
from piflow.analysis.engine_check import checker
from piflow.analysis.syntax_check import _natively_accepted, syntax_problems
from test_analysis_fuzz import SCRIPT

CAPS = Capabilities.create(models=["openai/gpt"], tools=["read"], agent_types=["reviewer"])


def _scripts(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "script" and isinstance(item, str):
                yield item
            else:
                yield from _scripts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _scripts(item)


CORPUS = sorted(set(_scripts(json.loads((CONFORMANCE_DIR / "corpus.json").read_text(encoding="utf-8")))))

DIFFERENCES = [
    'function f(){} function f(){}',
    'var f; function f(){}',
    'function f(){} var f;',
    'async function f(){} function f(){}',
    'function* f(){} var f;',
    '{ function f(){} function f(){} }',
    'function g(){ var await = 1; }',
    'function g(await){}',
    'function g(){ await: 1; }',
    'class await {}',
    'function await(){}',
    'var yield = 1;',
    'let let = 1;',
    'var let = 1;',
    'var static = 1;',
    'var implements = 1;',
    'var package = 1;',
    'new.target',
    '() => new.target',
    'function g(){ return () => new.target }',
    'with (a) {}',
    'delete x;',
    'eval = 1;',
    'arguments = 1;',
    'var x = 010;',
    'var x = "\\01";',
    'var x = 08;',
    'if (a) function f(){}',
    'l: function f(){}',
    'x = 1 <!-- 2',
    'x = 1',
    '--> comment',
    'import.meta',
    'import("x")',
    'export const meta = {name: "a"}; export const x = 1;',
    'export const meta = {name: "a"}; let meta = 1;',
    'export const meta = {name: "a"}; var meta = 1;',
    'export const meta = {name: "a"}; function meta(){}',
    'export const meta = {name: "a"};',
    'return 1;',
    '/(?i:a)/',
    '/(?<a>x)|(?<a>y)/',
    '/[\\p{L}--\\p{N}]/v',
    '/a/v',
    '/\\p{Lu}/u',
    '/(?<𝒜>.)/u',
    'class A { #x; m(){ return #x in this } }',
    'class A { static { await } }',
    'class A { static { var arguments } }',
    'class A { x = arguments }',
    'class A { static x = arguments }',
    'class A { constructor(){} constructor(){} }',
    'class A { get #a(){} set #a(v){} }',
    'class A { #a; #a }',
    'class A extends B { m(){ super() } }',
    '({ __proto__: 1, __proto__: 2 })',
    '({ __proto__: 1, "__proto__": 2 })',
    '({ __proto__: 1, ["__proto__"]: 2 })',
    'a?.b = 1',
    'a?.`x`',
    'new a?.b()',
    'for (let x of []) { var x; }',
    'try {} catch (e) { let e; }',
    'try {} catch (e) { var e; }',
    'try {} catch ([e]) { var e; }',
    'for (async of x) ;',
    'for (let of x) ;',
    'let x; { var x; }',
    'label: label: ;',
    'x: while(1) { continue y; }',
    'a => { "use strict"; }',
    '(a = 1) => { "use strict"; }',
    'function h(a, a){}',
    '(a, a) => 1',
    'async (a, a) => 1',
    'function h({a}, a){}',
    'var \\u0061wait = 1;',
    'var \\u{61}wait = 1;',
    '\\u0061sync function q(){}',
    'var x = 1_000_000;',
    'var x = 1__0;',
    'var x = 0_1;',
    'var x = 1n;',
    'var x = 01n;',
    'var y = x ?? a || b;',
    'var y = a ** -b;',
    'var y = -a ** b;',
    'async function q(){ for await (const x of y); }',
    'for await (const x of y);',
    'var u = "\\u{110000}";',
    'var t = `\\u{110000}`;',
    'var t = tag`\\u{110000}`;',
    'using x = y;',
    'await using x = y;',
    '@dec class Q {}',
    'var s = "\\8";',
    'function f8(){ "\\8"; }',
    'x = { async *[Symbol.iterator](){} }',
    'x = { get a(b){} }',
    'x = { set a(){} }',
    'class Q { static prototype(){} }',
    'class Q { static prototype = 1 }',
    'class Q { constructor = 1 }',
    'class Q { #constructor(){} }',
    'yield = 1;',
    'async function q(){ var await; }',
    'function *q(){ var yield; }',
    'a: { break a; }',
    'a: { continue a; }',
    'switch (1) { case 1: let z; case 2: let z; }',
    'if (1) let x = 1;',
    'while (1) const x = 1;',
    'for (const x = 1;;) {}',
    'for (const x in y) {}',
    'for (let [x, x] of y) {}',
    'let [x, x] = y;',
    'var z; let z;',
    'a = b ? c : d => e;',
    '(async () => { await 1 })',
    'x = async function(){ await = 1 }',
    'x = function(){ "use strict"; 010 }',
    '/a/gg',
    '/a/z',
    '/(/',
    '`${`${a}`}`',
    'x = a\\u2028b',
    'var \\u{1D49C} = 1;',
    'var \\u0030 = 1;',
    'class Q { static async *#m(){} }',
    'x = 0.e1',
    'x = .e1',
    'x = 5.toString()',
    'x = 5..toString()',
    'function g(){ await; }',
    'function g(){ return await }',
    'function g(){ x = await }',
    'function g(){ await(1) }',
    'function g(){ await.x }',
    'function g(){ ({await}) }',
    'function g(){ ({await} = x) }',
    'function g(){ try{}catch(await){} }',
    'x = function await(){}',
    'function g(){ class await{} }',
    'function g(){ let {await: a} = x }',
    'function g(){ a.await }',
    'function g(){ var $await = 1, await$ = 2, _await = 3, await1 = 4, awaited = 5; }',
    'function g(){ var a\\u0061wait = 1; return await\\u0061 }',
    'function g(){ var aw\\u0061it = 1 }',
    'function g(){ aw\\u0061it: 1 }',
    'var \\u0061 = 1;',
    'x = { \\u0061: 1 }',
    'x.\\u0061',
    'new a?.b',
    'new a?.()',
    'new a?.b.c()',
    'new (a?.b)()',
    'new a.b?.c',
    'a?.b++',
    'for (a?.b of x);',
    '[a?.b] = x',
    '({x: a?.b} = y)',
    'x = { await: 1, "new": 2 }',
    'class Q { await(){} #await = 1 }',
    'const p = "please await the result"; // await in comment',
    'x = `await ${y}`',
    'label: for(;;) { break label }',
    'x = a?.[b]?.(c)',
    'x = new Map(); y = x?.get("a")',
    'export const meta = { name: "x" };',
    'const meta2 = await agent("hi");',
]
"""Where acorn (strict module) and QuickJS (script) may disagree: redeclarations, `await` and `yield`
as identifiers, strict-mode restrictions, module-only syntax, newer syntax one side lacks, escapes."""


def native_verdict_holds(text: str) -> bool:
    """Whether the fast path took the text; raises AssertionError when it took one it must not."""
    document = ScriptDocument(text)
    facts = document.facts(extensible.DIALECT.walk)
    if not _natively_accepted(document, syntax_problems(document, facts, compile=False)):
        return False
    acorn = checker().acorn_error(text, module=True)
    assert acorn is None, f"fast path accepted what acorn rejects: {acorn.full_message}"
    assert checker().compile_error(document.body_text) is None, "fast path accepted what the body compile rejects"
    return True


def test_the_fast_path_agrees_with_acorn_on_every_corpus_script() -> None:
    taken = sum(native_verdict_holds(text) for text in CORPUS)
    assert taken > len(CORPUS) // 2  # and it is the path valid scripts take


@pytest.mark.parametrize("text", DIFFERENCES)
def test_the_fast_path_agrees_with_acorn_where_the_grammars_differ(text: str) -> None:
    native_verdict_holds(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SCRIPT)
def test_the_fast_path_agrees_with_acorn_on_fuzzed_scripts(text: str) -> None:
    native_verdict_holds(text)


@pytest.mark.parametrize(
    "text",
    [
        "function g() { await: 1; }\nreturn 1;",
        "const x = new a?.b();",
        "let y = 1 <!-- 2\n;",
        "function g() { var aw\\u0061it = 1; }",
    ],
)
def test_what_only_acorn_rejects_keeps_acorn_s_exact_message(text: str) -> None:
    acorn = checker().acorn_error(text, module=True)
    assert acorn is not None
    with pytest.raises(WorkflowError) as raised:
        preflight(text, CAPS)
    expected = ("INVALID_SYNTAX", f"Invalid workflow syntax: {acorn.full_message}")
    assert (raised.value.code, raised.value.message) == expected


def test_a_realistic_valid_script_is_accepted_without_acorn() -> None:
    text = "export const meta = { name: 'x' };\nconst r = await agent('hi', { model: 'openai/gpt' });\nreturn r?.x;\n"
    assert native_verdict_holds(text)
    assert preflight(text, CAPS).to_json()["referenced"]["models"] == ["openai/gpt"]


def test_a_cached_verdict_answers_as_the_first_check_did() -> None:
    text = "const a = 1;\nlet a = 2;\nconst = ;\n"
    first = analyze(text, CAPS, compile=True)
    assert [f.message for f in first][:1] == ["Invalid workflow syntax: Identifier 'a' has already been declared (2:4)"]
    assert analyze(text, CAPS, compile=True) == first
