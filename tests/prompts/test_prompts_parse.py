"""Table-driven cases for the judge-output parser (parse_judgment, parse_letter)."""

from __future__ import annotations

import pytest

from judgefuse.prompts import (
    ParsedJudgment,
    normalise_choice,
    normalise_confidence,
    parse_judgment,
    parse_letter,
)
from judgefuse.prompts.parse import MAX_CHARS

J = '{"selected_output": "Output (b)", "confidence_score": 85, "explanation": "B is right."}'

# (reply, choice, confidence, error substring or None, note substring or None)
CASES = [
    # shapes of the reply
    (J, "B", 0.85, None, None),
    ("```json\n" + J + "\n```", "B", 0.85, None, None),
    ("```\n" + J + "\n```\n", "B", 0.85, None, None),
    ("Let me compare them.\n" + J, "B", 0.85, None, None),
    (J + "\nI hope this helps!", "B", 0.85, None, None),
    ("Reasoning...\n```json\n" + J + "\n```\nThat is all.", "B", 0.85, None, None),
    ('{"note": "draft"} {"selected_output": "Output (a)", "confidence_score": 60} and finally '
     + J, "B", 0.85, None, "used the last"),
    ('{"selected_output": "Output (a)", "confidence_score": 60, "explanation": "draft"}\n' + J,
     "B", 0.85, None, "disagree"),
    ('{"verdict": {"selected_output": "Output (a)", "confidence_score": 70}}', "A", 0.7, None, None),
    ("{'selected_output': 'Output (a)', 'confidence_score': 77, 'explanation': 'a'}",
     "A", 0.77, None, "leniently"),
    ('{"selected_output": "Output (a)", "confidence_score": 77, "explanation": "a",}',
     "A", 0.77, None, "leniently"),
    ('{"selected_output": "Output (a)", "confidence_score": 77, "ok": true,}', "A", 0.77, None,
     "leniently"),
    ("{'selected_output': 'Output (b)', 'confidence_score': 40, 'sure': false}", "B", 0.4, None,
     "leniently"),
    ('{\u201cselected_output\u201d: \u201cOutput (b)\u201d, \u201cconfidence_score\u201d: 90}',
     "B", 0.9, None, "leniently"),
    ('{"selected_output": "Output (a)", "confidence_score": 90, "explanation": "cut off mid-sen',
     "A", 0.9, None, "incomplete JSON"),
    ('{"Selected Output": "Output (a)", "Confidence Score": 65}', "A", 0.65, None, None),
    ('{"choice": "B", "confidence": 0.8}', "B", 0.8, None, "key 'choice'"),
    # confidence scales
    ('{"selected_output": "Output (a)", "confidence_score": "85%"}', "A", 0.85, None, None),
    ('{"selected_output": "Output (a)", "confidence_score": "85"}', "A", 0.85, None, None),
    ('{"selected_output": "Output (a)", "confidence_score": 0.85}', "A", 0.85, None, None),
    ('{"selected_output": "Output (a)", "confidence_score": "0.85"}', "A", 0.85, None, None),
    ('{"selected_output": "Output (a)", "confidence_score": "85 percent"}', "A", 0.85, None, None),
    ('{"selected_output": "Output (a)", "confidence_score": "85/100"}', "A", 0.85, None, None),
    ('{"selected_output": "Output (a)", "confidence_score": 100}', "A", 1.0, None, None),
    ('{"selected_output": "Output (a)", "confidence_score": 1}', "A", 1.0, None, "fraction"),
    ('{"selected_output": "Output (a)", "confidence_score": "1"}', "A", 1.0, None, "fraction"),
    ('{"selected_output": "Output (a)", "confidence_score": 1.0}', "A", 1.0, None, "fraction"),
    ('{"selected_output": "Output (a)", "confidence_score": "1%"}', "A", 0.01, None, None),
    ('{"selected_output": "Output (a)", "confidence_score": 0}', "A", 0.0, None, None),
    ('{"selected_output": "Output (a)", "confidence_score": 1.5}', "A", 0.015, None, None),
    ('{"selected_output": "Output (a)", "confidence_score": 50}', "A", 0.5, None, None),
    # confidence out of range / unreadable / missing: choice kept, confidence None, error
    ('{"selected_output": "Output (a)", "confidence_score": 150}', "A", None, "above 100", None),
    ('{"selected_output": "Output (a)", "confidence_score": "120%"}', "A", None, "above 100", None),
    ('{"selected_output": "Output (a)", "confidence_score": -5}', "A", None, "negative", None),
    ('{"selected_output": "Output (a)", "confidence_score": NaN}', "A", None, "finite", None),
    ('{"selected_output": "Output (a)", "confidence_score": Infinity}', "A", None, "finite", None),
    ('{"selected_output": "Output (a)", "confidence_score": "high"}', "A", None, "not a number",
     None),
    ('{"selected_output": "Output (a)", "confidence_score": true}', "A", None, "not a number", None),
    ('{"selected_output": "Output (a)", "confidence_score": null}', "A", None, "not a number", None),
    ('{"selected_output": "Output (a)", "explanation": "no score"}', "A", None,
     "missing confidence_score", None),
    # choice variants
    ('{"selected_output": "Output (A)", "confidence_score": 70}', "A", 0.7, None, None),
    ('{"selected_output": "output (b)", "confidence_score": 70}', "B", 0.7, None, None),
    ('{"selected_output": "(a)", "confidence_score": 70}', "A", 0.7, None, None),
    ('{"selected_output": "A", "confidence_score": 70}', "A", 0.7, None, None),
    ('{"selected_output": "b", "confidence_score": 70}', "B", 0.7, None, None),
    ('{"selected_output": "Answer A", "confidence_score": 70}', "A", 0.7, None, None),
    ('{"selected_output": "Response B", "confidence_score": 70}', "B", 0.7, None, None),
    ('{"selected_output": "Output 1", "confidence_score": 70}', "A", 0.7, None, None),
    ('{"selected_output": "Output 2", "confidence_score": 70}', "B", 0.7, None, None),
    ('{"selected_output": "Output B", "confidence_score": 70}', "B", 0.7, None, None),
    ('{"selected_output": "**Output (b)**", "confidence_score": 70}', "B", 0.7, None, None),
    ('{"selected_output": "Output (b) is better", "confidence_score": 70}', "B", 0.7, None,
     "read as B"),
    ('{"selected_output": "Output (a) and Output (b)", "confidence_score": 70}', None, None,
     "both or neither", None),
    ('{"selected_output": "Tie", "confidence_score": 50}', None, None, "both or neither", None),
    ('{"selected_output": "Neither", "confidence_score": 50}', None, None, "both or neither", None),
    ('{"selected_output": "Output (c)", "confidence_score": 50}', None, None, "unrecognised", None),
    ('{"selected_output": 1, "confidence_score": 50}', None, None, "not text", None),
    ('{"selected_output": null, "confidence_score": 50}', None, None, "null", None),
    ('{"selected_output": "", "confidence_score": 50}', None, None, "empty", None),
    # prose fallback
    ("The better output is Output (b). Confidence: 70%", "B", 0.7, None, "prose"),
    ("Output (a) is clearly better. My confidence is 90.", "A", 0.9, None, "prose"),
    ("After weighing both, I choose B. Confidence level: 0.6", "B", 0.6, None, "prose"),
    ("Final answer: Output (a)\nConfidence: 80/100", "A", 0.8, None, "prose"),
    ("Verdict: **B** (confidence 65%)", "B", 0.65, None, "prose"),
    ("Output (b)", "B", None, "missing confidence_score", "prose"),
    ("The better output is Output (b).", "B", None, "missing confidence_score", "prose"),
    ("Output (a) is better at style, but Output (b) is better overall.", None, None, "ambiguous",
     None),
    ("Both outputs have merits; it is hard to say.", None, None, "no verdict found", None),
    ("I think a better answer would mention units.", None, None, "no verdict found", None),
    # unreadable
    ("", None, None, "empty reply", None),
    ("   \n\t", None, None, "empty reply", None),
    ('{"explanation": "I cannot decide."}', None, None, "no verdict found", None),
    ("{{{{", None, None, "no verdict found", None),
]


@pytest.mark.parametrize("reply, choice, confidence, error, note", CASES)
def test_parse_judgment_table(
    reply: str, choice: str | None, confidence: float | None, error: str | None, note: str | None
) -> None:
    parsed = parse_judgment(reply)
    assert isinstance(parsed, ParsedJudgment)
    assert parsed.choice == choice, parsed
    if confidence is None:
        assert parsed.confidence is None, parsed
    else:
        assert parsed.confidence == pytest.approx(confidence, abs=1e-12), parsed
    if error is None:
        assert parsed.error is None, parsed
        assert parsed.ok
    else:
        assert parsed.error is not None and error in parsed.error, parsed
        assert not parsed.ok
    if note is not None:
        assert any(note in n for n in parsed.notes), parsed
    if parsed.choice is None:
        assert parsed.confidence is None and parsed.error


def test_explanation_is_kept() -> None:
    assert parse_judgment(J).explanation == "B is right."
    reasoned = parse_judgment('{"selected_output": "A", "confidence_score": 60, "reasoning": "r"}')
    assert reasoned.explanation == "r"
    listed = parse_judgment('{"selected_output": "A", "confidence_score": 60, "explanation": [1]}')
    assert listed.explanation == "[1]"


def test_mp_samples_need_no_confidence() -> None:
    parsed = parse_judgment('{"selected_output": "Output (b)", "explanation": "x"}',
                            require_confidence=False)
    assert (parsed.choice, parsed.confidence, parsed.error) == ("B", None, None)
    bad = parse_judgment('{"selected_output": "Output (b)", "confidence_score": "lots"}',
                         require_confidence=False)
    assert bad.choice == "B" and bad.error is None and any("ignored" in n for n in bad.notes)


def test_non_text_input_is_an_error_not_an_exception() -> None:
    for value in (None, b"{}", 3, ["A"]):
        parsed = parse_judgment(value)  # type: ignore[arg-type]
        assert parsed.choice is None and "not text" in (parsed.error or "")
        assert parse_letter(value)[0] is None  # type: ignore[arg-type]


def test_very_long_reply_is_read_from_its_end() -> None:
    reply = "x" * (MAX_CHARS + 10) + J
    parsed = parse_judgment(reply)
    assert parsed.choice == "B" and any("read from its last" in n for n in parsed.notes)


def test_adversarial_braces_are_fast_and_safe() -> None:
    for reply in ("{" * 50_000, "{\"a\":" * 20_000, "[" * 50_000 + J, "{'" * 30_000, "}{" * 30_000):
        parsed = parse_judgment(reply)
        assert isinstance(parsed, ParsedJudgment)
    assert parse_judgment("[" * 50_000 + J).choice == "B"


@pytest.mark.parametrize(
    "value, letter",
    [("Output (a)", "A"), ("Output (A)", "A"), ("(a)", "A"), ("A", "A"), ("a", "A"),
     ("Answer A", "A"), ("Output 1", "A"), ("output(b)", "B"), ("[B]", "B"), ("Option B", "B"),
     ("Assistant B", "B"), ("Output 2", "B"), ("  'Output (b)'. ", "B"), ("Ｂ", "B")],
)
def test_normalise_choice_variants(value: str, letter: str) -> None:
    assert normalise_choice(value)[:2] == (letter, None)


@pytest.mark.parametrize("value", ["1", "2", "C", "ab", "better", "both", "tie", "Output (a)/(b)"])
def test_normalise_choice_refuses(value: str) -> None:
    letter, error, _ = normalise_choice(value)
    assert letter is None and error


@pytest.mark.parametrize(
    "value, expected",
    [(85, 0.85), ("85", 0.85), ("85%", 0.85), (0.85, 0.85), (".85", 0.85), ("0,85", 0.85),
     ("85,5", 0.855), (1, 1.0), ("1", 1.0), (0, 0.0), ("1%", 0.01), (100, 1.0), ("100%", 1.0),
     (100.0000000001, 1.0), ("8.5e1", 0.85)],
)
def test_normalise_confidence(value: object, expected: float) -> None:
    conf, error, _ = normalise_confidence(value)
    assert error is None and conf == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("value", [101, -1, "-5%", float("nan"), float("inf"), True, None, "high",
                                   [85], 10**400])
def test_normalise_confidence_refuses(value: object) -> None:
    conf, error, _ = normalise_confidence(value)
    assert conf is None and error


LETTERS = [
    ("A", "A"), ("B", "B"), ("a", "A"), (" b\n", "B"), ("**A**", "A"), ("(a)", "A"), ("A.", "A"),
    ('"B"', "B"), ("`A`", "A"), ("Output (b)", "B"), ("Answer: A", "A"), ("Final answer: b", "B"),
    ("B.\nBecause it is correct.", "B"), ("A\n\nOutput (a) is correct.", "A"),
    ("B) the second one", "B"), ('{"selected_output": "Output (b)"}', "B"),
    ("The answer is A.", "A"), ("Ｂ", "B"),
]


@pytest.mark.parametrize("reply, letter", LETTERS)
def test_parse_letter_reads(reply: str, letter: str) -> None:
    assert parse_letter(reply) == (letter, None)


@pytest.mark.parametrize(
    "reply", ["", "  ", "C", "AB", "A good answer would cite sources.", "Both.", "I cannot tell.",
              "Output (a) is better at X but Output (b) is better at Y."]
)
def test_parse_letter_refuses(reply: str) -> None:
    letter, error = parse_letter(reply)
    assert letter is None and error
