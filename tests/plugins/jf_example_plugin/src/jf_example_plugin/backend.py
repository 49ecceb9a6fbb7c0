"""A judge backend that answers without a network: ``model: canned/95`` always picks Output (a)
at 95% (any integer 0-100 after the slash; 73 when there is none).

Enough to run a whole panel offline; a real backend would call its provider's SDK here.
"""

from __future__ import annotations

import json

from judgefuse.judges.registry import judge_backend
from judgefuse.judges.transport.request import ChatRequest, ChatResponse


def reply(model: str) -> str:
    """The SC answer for ``model`` (``canned/<confidence>``)."""
    _, _, tail = model.partition("/")
    confidence = int(tail) if tail.isdigit() else 73
    return json.dumps({"selected_output": "Output (a)", "confidence_score": confidence, "explanation": "canned"})


class CannedClient:
    """Returns :func:`reply` for each of the request's ``n`` samples."""

    async def complete(self, request: ChatRequest) -> ChatResponse:
        return ChatResponse(texts=[reply(request.model)] * request.n, first_token_top_logprobs=[],
                            prompt_tokens=0, completion_tokens=0, latency_s=0.0, cost_usd=0.0,
                            model=request.model)

    async def aclose(self) -> None:
        return None


@judge_backend("jfx-canned")
def canned(config, *, api_base, api_key, max_connections) -> CannedClient:  # noqa: ANN001 - the factory protocol
    return CannedClient()
