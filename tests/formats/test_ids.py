"""Tool ids as each provider takes them: in its rule, unique in a request, and back as they were."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from convmem.formats._ids import RULES, SentIds, from_anthropic_id, original_id, spell, to_anthropic_id

from .._quick import examples

_ids = st.one_of(
    st.text(min_size=1, max_size=90),
    st.sampled_from(["call_0", "functions.get_weather:0", "cmx_abc", "cmx2_call_5f0", "cmxh_ab", "toolu_01A"]),
)


@settings(max_examples=examples(300))
@given(_ids, st.sampled_from(sorted(RULES)), st.integers(1, 5))
def test_a_spelled_id_keeps_its_rule_and_comes_back(call_id: str, fmt: str, occurrence: int) -> None:
    rule = RULES[fmt]
    sent = spell(call_id, rule, occurrence)
    assert rule.takes(sent)
    if not sent.startswith("cmxh"):
        assert original_id(sent) == call_id
    if occurrence == 1 and rule.takes(call_id) and not call_id.startswith("cmx"):
        assert sent == call_id, "an id the provider takes is sent as it is"


@settings(max_examples=examples(200))
@given(st.lists(_ids, min_size=1, max_size=12), st.sampled_from(sorted(RULES)))
def test_the_calls_of_a_request_get_distinct_ids_and_their_results_follow_them(ids: list[str], fmt: str) -> None:
    sent = SentIds(RULES[fmt])
    spelled = []
    for call_id in ids:
        spelled.append(sent.call(call_id))
        assert sent.result(call_id) == spelled[-1], "a result goes with the latest call of its id"
    assert len(set(spelled)) == len(spelled)
    for call_id, out in zip(ids, spelled, strict=True):
        assert sent.originals.get(out, out) == call_id


def test_the_documented_spellings() -> None:
    assert to_anthropic_id("functions.get_weather:0") == "cmx_functions_2eget_5fweather_3a0"
    assert from_anthropic_id("cmx_functions_2eget_5fweather_3a0") == "functions.get_weather:0"
    assert original_id("cmx2_call_5f0") == "call_0"
    assert original_id("cmx1_call_5f0") == "cmx1_call_5f0", "not a spelling of ours: as it is"
    long_id = "c" * 70
    hashed = spell(long_id, RULES["responses"])
    assert hashed.startswith("cmxh_")
    assert len(hashed) <= 64
    assert original_id(hashed) == hashed, "a hashed id is one way; SentIds keeps its inverse"
    ids = SentIds(RULES["responses"])
    assert ids.originals == {}
    assert ids.call(long_id) == hashed
    assert ids.originals == {hashed: long_id}
