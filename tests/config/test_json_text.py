"""JSON read as Node's `JSON.parse`: V8's error texts and value locations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from piflow.config.json_text import JsonSyntaxError, parse_json_document, parse_json_text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Unexpected end of JSON input"),
        ("{", "Expected property name or '}' in JSON at position 1 (line 1 column 2)"),
        ('{"a": 1,}', "Expected double-quoted property name in JSON at position 8 (line 1 column 9)"),
        ('{"a" 1}', "Expected ':' after property name in JSON at position 5 (line 1 column 6)"),
        (
            '{"a": 1 "b": 2}',
            "Expected ',' or '}' after property value in JSON at position 8 (line 1 column 9)",
        ),
        ("[1 2]", "Expected ',' or ']' after array element in JSON at position 3 (line 1 column 4)"),
        ("[1,]", "Unexpected token ']', \"[1,]\" is not valid JSON"),
        ("{} x", "Unexpected non-whitespace character after JSON at position 3 (line 1 column 4)"),
        ('"abc', "Unterminated string in JSON at position 4 (line 1 column 5)"),
        ("-", "No number after minus sign in JSON at position 1 (line 1 column 2)"),
        ("1.", "Unterminated fractional number in JSON at position 2 (line 1 column 3)"),
        ("1e", "Exponent part is missing a number in JSON at position 2 (line 1 column 3)"),
        ("NaN", '"NaN" is not valid JSON'),
        ("\n\n  x", "Unexpected token 'x', \"\n\n  x\" is not valid JSON"),
    ],
)
def test_errors_use_v8_wording(text: str, message: str) -> None:
    with pytest.raises(JsonSyntaxError) as caught:
        parse_json_text(text)
    assert caught.value.message == message


def test_line_and_column_count_crlf_as_one_break() -> None:
    with pytest.raises(JsonSyntaxError) as caught:
        parse_json_text('{\r\n  "a": 1\r\n  "b": 2}')
    assert caught.value.location is not None
    assert (caught.value.location.line, caught.value.location.column) == (3, 3)


def test_positions_are_utf16_code_units() -> None:
    with pytest.raises(JsonSyntaxError) as caught:
        parse_json_text('["😀" 1]')
    assert caught.value.message.startswith("Expected ',' or ']' after array element in JSON at position 6 ")


def test_values_follow_javascript_semantics() -> None:
    assert parse_json_text('{"b": 1, "2": 0, "a": 1.0, "b": 3}') == {"2": 0, "b": 3, "a": 1}
    assert list(parse_json_text('{"b": 1, "2": 0}')) == ["2", "b"]
    assert parse_json_text('"\\ud83d\\ude00"') == "😀"


def test_documents_locate_keys_and_values() -> None:
    document = parse_json_document('{\n  "modelAliases": {\n    "fast": "a/b"\n  }\n}')
    key = document.key_locations[("modelAliases", "fast")]
    assert (key.line, key.column) == (3, 5)
    assert document.location(("modelAliases", "fast", "missing")) == key


def test_deep_nesting_does_not_exhaust_the_stack() -> None:
    depth = 100_000
    value = parse_json_text("[" * depth + "]" * depth)
    for _ in range(depth - 1):
        value = value[0]
    assert value == []


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet='{}[]":,0123456789.-eE+ truefalsnul\\u"abc\n\t\r😀', max_size=60))
def test_any_text_parses_or_raises_a_json_syntax_error(text: str) -> None:
    try:
        parse_json_text(text)
    except JsonSyntaxError as error:
        assert error.message
