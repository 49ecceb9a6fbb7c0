"""DeepEval metrics backed by a judgefuse panel (``pip install 'judgefuse[deepeval]'``).

* :class:`JudgefuseArenaMetric` for DeepEval's pairwise (arena) test cases: an
  ``ArenaTestCase`` with two contestants is one judgefuse pair (the first contestant's
  ``actual_output`` is answer A, the second's B, the shared ``input`` the question);
  ``measure`` returns the winner's name, as DeepEval's ``ArenaGEval`` does, and keeps the
  verdict: ``score`` the calibrated confidence in the winner, ``reason`` how the judges split,
  ``verdict`` / ``metadata`` the route and each vote. (``deepeval.compare`` builds its own
  ``ArenaGEval`` from the metric's fields, so call ``measure`` per test case, or
  :func:`compare`, which counts the wins the same way.)
* :class:`JudgefuseReferenceMetric` for an ``LLMTestCase`` with an ``expected_output``: the
  ``actual_output`` (A) judged against the reference (B); ``score`` is the fused probability
  that the output is the better answer, a success when it is at least ``threshold``. Works in
  ``deepeval.evaluate`` and ``assert_test`` like any metric.

Both call the gateway at ``base_url`` (``AsyncClient`` in ``a_measure``), with the client's
retries; a grading failure is raised, so DeepEval records an error instead of a score.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from deepeval.metrics import BaseArenaMetric, BaseMetric
from deepeval.test_case import ArenaTestCase, LLMTestCase

from judgefuse.client import AsyncClient, Client, RetryPolicy
from judgefuse.client.models import VerdictOut
from judgefuse.integrations.verdict_fields import explanation, verdict_metadata, win_probability

__all__ = ["JudgefuseArenaMetric", "JudgefuseReferenceMetric", "compare"]

TIE = "tie"
"""What :meth:`JudgefuseArenaMetric.measure` returns when the panel decided nothing."""


class _GatewayMetric:
    """Where the gateway is and what the last verdict was (both metrics)."""

    def __init__(self, base_url: str, api_key: str | None, panel: str | None,
                 retry: RetryPolicy | None, timeout_s: float | None) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.panel = panel
        self.retry = retry
        self.timeout_s = timeout_s
        self.verdict: VerdictOut | None = None
        self.metadata: dict[str, Any] = {}

    def _judge(self, question: str, answer_a: str, answer_b: str) -> VerdictOut:
        with Client(self.base_url, self.api_key, retry=self.retry, timeout=self.timeout_s) as client:
            return client.judge(question=question, answer_a=answer_a, answer_b=answer_b, panel=self.panel,
                                metadata={"source": "deepeval"})

    async def _a_judge(self, question: str, answer_a: str, answer_b: str) -> VerdictOut:
        async with AsyncClient(self.base_url, self.api_key, retry=self.retry, timeout=self.timeout_s) as client:
            return await client.judge(question=question, answer_a=answer_a, answer_b=answer_b,
                                      panel=self.panel, metadata={"source": "deepeval"})


def _pair(test_case: ArenaTestCase) -> tuple[str, str, str, str, str]:
    if len(test_case.contestants) != 2:
        raise ValueError(f"judgefuse judges pairs: an arena test case with 2 contestants, not "
                         f"{len(test_case.contestants)}")
    first, second = test_case.contestants
    return (first.name, second.name, str(first.test_case.input),
            str(first.test_case.actual_output), str(second.test_case.actual_output))


class JudgefuseArenaMetric(_GatewayMetric, BaseArenaMetric):
    """The winner of a two-contestant ``ArenaTestCase`` by a judgefuse panel (module docstring)."""

    def __init__(self, base_url: str = "http://localhost:8000", api_key: str | None = None, *,
                 panel: str | None = None, retry: RetryPolicy | None = None,
                 timeout_s: float | None = None, async_mode: bool = True) -> None:
        super().__init__(base_url, api_key, panel, retry, timeout_s)
        self.async_mode = async_mode
        self.include_reason = True
        self.winner: str | None = None
        self.score: float | None = None
        self.success: bool | None = None

    def _take(self, verdict: VerdictOut, names: tuple[str, str]) -> str:
        self.verdict = verdict
        self.metadata = verdict_metadata(verdict)
        self.winner = None if verdict.choice is None else names[0 if verdict.choice == "A" else 1]
        self.score = verdict.confidence
        self.reason = explanation(verdict, names=names)
        self.success = self.winner is not None
        return self.winner or TIE

    def measure(self, test_case: ArenaTestCase, *args: Any, **kwargs: Any) -> str:
        first, second, question, answer_a, answer_b = _pair(test_case)
        return self._take(self._judge(question, answer_a, answer_b), (first, second))

    async def a_measure(self, test_case: ArenaTestCase, *args: Any, **kwargs: Any) -> str:
        first, second, question, answer_a, answer_b = _pair(test_case)
        return self._take(await self._a_judge(question, answer_a, answer_b), (first, second))

    def is_successful(self) -> bool:
        return bool(self.success)

    @property
    def __name__(self) -> str:
        return "judgefuse (arena)"


def compare(test_cases: Iterable[ArenaTestCase], metric: JudgefuseArenaMetric) -> Counter[str]:
    """Wins per contestant over ``test_cases`` (``"tie"`` counts undecided verdicts), as
    ``deepeval.compare`` reports for its own arena metric."""
    return Counter(metric.measure(case) for case in test_cases)


def _reference_pair(test_case: LLMTestCase) -> tuple[str, str, str]:
    if test_case.expected_output is None or test_case.actual_output is None:
        raise ValueError("judgefuse reference metric: the test case needs actual_output and expected_output")
    return str(test_case.input), str(test_case.actual_output), str(test_case.expected_output)


class JudgefuseReferenceMetric(_GatewayMetric, BaseMetric):
    """``actual_output`` against ``expected_output`` by a judgefuse panel (module docstring)."""

    def __init__(self, base_url: str = "http://localhost:8000", api_key: str | None = None, *,
                 threshold: float = 0.5, panel: str | None = None, retry: RetryPolicy | None = None,
                 timeout_s: float | None = None, async_mode: bool = True) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError("threshold is a probability: between 0 and 1")
        super().__init__(base_url, api_key, panel, retry, timeout_s)
        self.threshold = threshold
        self.async_mode = async_mode
        self.include_reason = True

    def _take(self, verdict: VerdictOut) -> float:
        self.verdict = verdict
        self.metadata = verdict_metadata(verdict)
        score = win_probability(verdict)
        self.score = score
        self.reason = explanation(verdict, names=("output", "reference"))
        self.success = score >= (self.threshold if self.threshold is not None else 0.5)
        return score

    def measure(self, test_case: LLMTestCase, *args: Any, **kwargs: Any) -> float:
        return self._take(self._judge(*_reference_pair(test_case)))

    async def a_measure(self, test_case: LLMTestCase, *args: Any, **kwargs: Any) -> float:
        return self._take(await self._a_judge(*_reference_pair(test_case)))

    def is_successful(self) -> bool:
        return bool(self.success)

    @property
    def __name__(self) -> str:
        return "judgefuse (reference)"
