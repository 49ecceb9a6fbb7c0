"""A promptfoo assertion graded by a judgefuse panel (promptfoo's ``python`` assertion type).

promptfoo calls ``get_assert(output, context)`` of a Python file named in the config
(``value: file://judgefuse_grader.py``, whose one line imports this function); ``context``
carries the test's ``vars``, the rendered ``prompt`` and the assertion's ``config``. The output
is judged pairwise against another answer, the output as A:

* ``config.reference_var`` (default ``reference``): the test variable holding the other
  answer (a reference answer, or another model's output stored beside the test);
* ``config.question_var`` (default ``question``): the variable holding the question; when the
  test has no such variable, the rendered prompt is the question;
* ``config.base_url`` (default ``$JUDGEFUSE_URL``, else ``http://localhost:8000``),
  ``config.api_key_env`` (default ``JUDGEFUSE_API_KEY``: the key is read from the environment,
  never written in the config), ``config.panel``;
* ``config.threshold`` (default 0.5): the assertion passes when the fused probability that the
  output is the better answer is at least this.

The result is promptfoo's GradingResult: ``pass``, ``score`` (that probability), ``reason``
(how the judges split), ``namedScores`` (``judgefuse_p_output``, ``judgefuse_confidence``) and
``metadata`` (the verdict id, choice, calibrated confidence, route and each judge's vote).
A gateway that cannot be reached after the client's retries, or refuses the request, raises:
promptfoo then fails the assertion with the error as its reason.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from judgefuse.client import Client
from judgefuse.integrations.verdict_fields import explanation, verdict_metadata, win_probability

__all__ = ["get_assert"]


def _question(context: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    variables = context.get("vars") or {}
    name = config.get("question_var", "question")
    if name in variables:
        return str(variables[name])
    prompt = context.get("prompt")
    if prompt is None:
        raise ValueError(f"judgefuse grader: no variable {name!r} and no prompt to use as the question")
    return str(prompt)


def _other_answer(context: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    variables = context.get("vars") or {}
    name = config.get("reference_var", "reference")
    if name not in variables:
        raise ValueError(f"judgefuse grader: the test has no variable {name!r} to compare the output with "
                         "(set config.reference_var)")
    return str(variables[name])


def get_assert(output: Any, context: Mapping[str, Any]) -> dict[str, Any]:
    """promptfoo's entry point (module docstring)."""
    config: Mapping[str, Any] = context.get("config") or {}
    base_url = config.get("base_url") or os.environ.get("JUDGEFUSE_URL") or "http://localhost:8000"
    api_key = os.environ.get(config.get("api_key_env", "JUDGEFUSE_API_KEY"))
    threshold = float(config.get("threshold", 0.5))
    answer = output if isinstance(output, str) else str(output)
    with Client(base_url, api_key) as client:
        verdict = client.judge(question=_question(context, config), answer_a=answer,
                               answer_b=_other_answer(context, config), panel=config.get("panel"),
                               metadata={"source": "promptfoo"})
    p_output = win_probability(verdict)
    return {
        "pass": p_output >= threshold,
        "score": p_output,
        "reason": explanation(verdict, names=("output", config.get("reference_var", "reference"))),
        "namedScores": {"judgefuse_p_output": p_output, "judgefuse_confidence": verdict.confidence},
        "metadata": {"judgefuse": verdict_metadata(verdict)},
    }
