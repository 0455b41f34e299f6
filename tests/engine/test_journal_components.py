"""Journal path components are JavaScript's `encodeURIComponent` of each part (spec G.2), whichever
way piflow computes them: the reference's paths are the journal's keys."""

from __future__ import annotations

from urllib.parse import quote

from hypothesis import given
from hypothesis import strategies as st

from piflow.engine.journal import agent_path, encode_component

ENCODE_URI_COMPONENT_SAFE = "-_.!~*'()"
"""What JavaScript's encodeURIComponent leaves alone besides ASCII letters and digits."""


@given(st.text(alphabet=st.sampled_from("aZ09:-_.!~*'() /%?#é\u4e2d😀\t"), max_size=12) | st.text(max_size=12))
def test_a_component_is_encoded_as_encode_uri_component_does(part: str) -> None:
    assert encode_component(part) == quote(part, safe=ENCODE_URI_COMPONENT_SAFE)


def test_an_agent_path_escapes_the_colons_of_its_call_site_and_occurrence() -> None:
    assert agent_path(("fan", "t 1"), "12:34", 2) == "agent/fan/t%201/callsite%3A12%3A34/occurrence%3A2"
