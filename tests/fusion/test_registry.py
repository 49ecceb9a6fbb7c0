"""The fusion-method registry: lookup, options, collisions, recalibrated names."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from judgefuse.fusion import (
    DuplicateFusionMethod,
    FusionMethod,
    LearnedFusionMethod,
    Recalibrated,
    StackedFusion,
    UnknownFusionMethod,
    Verdict,
    available_methods,
    fusion_method,
    get_method,
    registry,
)
from judgefuse.judges.types import JudgeVote


@pytest.fixture
def scratch_names() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        registry.METHODS.unregister(name)


def test_builtins_are_listed() -> None:
    assert set(available_methods()) >= {
        "majority",
        "confidence_weighted",
        "sqrt_confidence_weighted",
        "entropy_weighted",
        "mean_probability",
        "stacked",
    }
    assert available_methods() == sorted(available_methods())


def test_unknown_name_lists_known_ones() -> None:
    with pytest.raises(UnknownFusionMethod, match="known methods: .*majority"):
        get_method("majorty")
    with pytest.raises(KeyError):  # also a KeyError for callers that expect one
        get_method("nope")


def test_register_and_collision(scratch_names: list[str]) -> None:
    @fusion_method("always_a_test")
    class AlwaysA:
        requires_fit = False

        def __init__(self, confidence: float = 0.9):
            self.name = "always_a_test"
            self.confidence = confidence

        def __call__(self, votes: Sequence[JudgeVote]) -> Verdict:
            return Verdict(choice="A", confidence=self.confidence, p_a=self.confidence, method=self.name)

    scratch_names.append("always_a_test")
    method = get_method("always_a_test", confidence=0.7)
    assert isinstance(method, FusionMethod)
    assert method([]).confidence == 0.7
    assert "always_a_test" in available_methods()

    with pytest.raises(DuplicateFusionMethod, match="already registered"):
        fusion_method("always_a_test")(AlwaysA)
    with pytest.raises(DuplicateFusionMethod):
        fusion_method("majority")(AlwaysA)


@pytest.mark.parametrize("bad", ["", " x", "a+b"])
def test_bad_names_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        fusion_method(bad)


def test_options_reach_the_factory() -> None:
    method = get_method("stacked", C=0.5)
    assert isinstance(method, StackedFusion) and method.C == 0.5
    assert isinstance(method, LearnedFusionMethod) and method.requires_fit


@pytest.mark.parametrize("recal", ["platt", "temperature", "isotonic", "histogram"])
def test_recalibrated_names(recal: str) -> None:
    a = get_method(f"majority+{recal}")
    b = get_method("majority", recalibrate=recal)
    assert isinstance(a, Recalibrated) and isinstance(b, Recalibrated)
    assert a.name == b.name == f"majority+{recal}"
    assert a.requires_fit


def test_recalibrate_options_and_conflicts() -> None:
    m = get_method("entropy_weighted", recalibrate="histogram", recalibrate_options={"n_bins": 5})
    assert m.recalibrator.n_bins == 5
    with pytest.raises(ValueError, match="conflicting"):
        get_method("majority+platt", recalibrate="isotonic")
    with pytest.raises(ValueError, match="unknown recalibrator"):
        get_method("majority+magic")
    with pytest.raises(UnknownFusionMethod):
        get_method("nope+platt")
