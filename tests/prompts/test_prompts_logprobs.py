"""letter_probabilities on hand-computed top-logprob lists."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from judgefuse.prompts import LetterProbs, letter_probabilities, token_letter


def _lse(*values: float) -> float:
    return math.log(sum(math.exp(v) for v in values))


def test_merges_variants_and_softmaxes() -> None:
    # " A" and "a" are the same letter: P_A = e^-0.5 + e^-1.5; P_B = e^-2
    probs = letter_probabilities([(" A", -0.5), ("a", -1.5), ("B", -2.0), ("The", -3.0)])
    p_a = (math.exp(-0.5) + math.exp(-1.5)) / (math.exp(-0.5) + math.exp(-1.5) + math.exp(-2.0))
    assert probs.error is None
    assert probs.p_a == pytest.approx(p_a, abs=1e-9)
    assert probs.p_b == pytest.approx(1 - p_a, abs=1e-9)
    assert probs.p_a + probs.p_b == pytest.approx(1.0, abs=1e-15)
    assert probs.choice == "A" and probs.confidence == pytest.approx(p_a, abs=1e-9)
    assert any("merged 2" in n for n in probs.notes)


def test_softmax_of_two_letters() -> None:
    # l_A = log 0.2, l_B = log 0.6 -> p_A = 0.25 exactly
    probs = letter_probabilities([("B", math.log(0.6)), ("A", math.log(0.2))])
    assert probs.p_a == pytest.approx(0.25, abs=1e-9) and probs.p_b == pytest.approx(0.75, abs=1e-9)
    assert probs.choice == "B" and probs.confidence == pytest.approx(0.75, abs=1e-9)


def test_many_variants_logsumexp() -> None:
    tokens = [("A", -1.0), (" A", -2.0), ("(a", -3.0), ("**A", -4.0), ("A.", -5.0), ("\u0120A", -6.0),
              ("\u2581b", -1.2), ("b", -2.5), (" B)", -3.5)]
    l_a = _lse(-1.0, -2.0, -3.0, -4.0, -5.0, -6.0)
    l_b = _lse(-1.2, -2.5, -3.5)
    probs = letter_probabilities(tokens)
    assert probs.p_a == pytest.approx(1 / (1 + math.exp(l_b - l_a)), abs=1e-9)


def test_equal_logprobs_tie() -> None:
    probs = letter_probabilities([("A", -0.7), ("B", -0.7)])
    assert probs.p_a == pytest.approx(0.5, abs=1e-12) and probs.choice is None
    assert probs.confidence == pytest.approx(0.5, abs=1e-12)


def test_neither_letter_is_an_error_never_a_guess() -> None:
    probs = letter_probabilities([("The", -0.1), ("Output", -2.5), ("C", -3.0), ("AB", -4.0)])
    assert probs == LetterProbs(None, None, "neither A nor B in top logprobs", ())
    assert probs.choice is None and probs.confidence is None
    assert letter_probabilities([]).error == "neither A nor B in top logprobs"


def test_only_one_letter_uses_the_smallest_listed_probability() -> None:
    # listed: A 0.7, "The" 0.2, "Output" 0.05 -> unlisted mass 0.05, smallest listed 0.05
    # B gets its upper bound min(0.05, 0.05) = 0.05 -> p_A = 0.7 / 0.75
    tokens = [("A", math.log(0.7)), ("The", math.log(0.2)), ("Output", math.log(0.05))]
    probs = letter_probabilities(tokens)
    assert probs.p_a == pytest.approx(0.7 / 0.75, abs=1e-9)
    assert any("B not in top logprobs" in n for n in probs.notes)


def test_only_one_letter_bounded_by_unlisted_mass() -> None:
    # listed: B 0.9, "x" 0.08 -> unlisted 0.02 < smallest listed 0.08 -> P_A <= 0.02
    probs = letter_probabilities([("b", math.log(0.9)), ("x", math.log(0.08))])
    assert probs.p_b == pytest.approx(0.9 / 0.92, abs=1e-9)
    assert probs.choice == "B"


def test_single_entry_list() -> None:
    # only "A" 0.6 listed: bound = min(0.6, 0.4) = 0.4 -> p_A = 0.6
    assert letter_probabilities([("A", math.log(0.6))]).p_a == pytest.approx(0.6, abs=1e-9)
    # A with all the mass: nothing is left for B
    assert letter_probabilities([("A", 0.0)]).p_a == 1.0


def test_provider_shapes_are_read() -> None:
    @dataclass
    class TopLogprob:
        token: str
        logprob: float

    as_dicts = [{"token": "A", "logprob": math.log(0.2), "bytes": [65]},
                {"token": "B", "logprob": math.log(0.6)}]
    as_objects = [TopLogprob("A", math.log(0.2)), TopLogprob("B", math.log(0.6))]
    for entries in (as_dicts, as_objects, [["A", math.log(0.2)], ["B", math.log(0.6)]]):
        assert letter_probabilities(entries).p_a == pytest.approx(0.25, abs=1e-9)


def test_malformed_entries_are_skipped_with_a_note() -> None:
    entries = [("A", math.log(0.2)), ("B", math.log(0.6)), ("A", float("nan")), (None, -1.0),
               ("B", "x"), ("A",), ("B", 0.5), ("A", True), 7, ("A", -math.inf)]
    probs = letter_probabilities(entries)  # type: ignore[arg-type]
    assert probs.p_a == pytest.approx(0.25, abs=1e-9)
    assert any("skipped 7" in n for n in probs.notes)
    assert letter_probabilities([("A", 1e-9), ("B", -math.inf)]).p_a == 1.0


def test_not_a_list_is_an_error() -> None:
    for value in (None, 3, object()):
        probs = letter_probabilities(value)  # type: ignore[arg-type]
        assert probs.p_a is None and probs.error and "could not read" in probs.error


def test_extreme_logprobs_do_not_overflow() -> None:
    assert letter_probabilities([("A", -1e6), ("B", 0.0)]).p_a == 0.0
    assert letter_probabilities([("A", 0.0), ("B", -1e6)]).p_a == 1.0
    only = letter_probabilities([("A", -1000.0), ("x", -1000.0)])
    assert only.p_a == pytest.approx(0.5)


@pytest.mark.parametrize(
    "token, letter",
    [("A", "A"), (" A", "A"), ("a", "A"), ("(a", "A"), ("**A", "A"), ("A)", "A"), ("\u0120B", "B"),
     ("\u2581b", "B"), ("\nB", "B"), ("Ａ", "A"), ("Answer", None), ("AB", None), ("", None),
     ("C", None), ("1", None), ("é", None)],
)
def test_token_letter(token: str, letter: str | None) -> None:
    assert token_letter(token) == letter
