"""The built-in judge backends: ``direct`` (our aiohttp client) and ``litellm`` (every provider).

Imported by :data:`judgefuse.judges.backends.BACKENDS` on its first lookup or listing. Each
factory imports its client inside its body, so an unused backend costs nothing.
"""

from __future__ import annotations

from pydantic import SecretStr

from judgefuse.judges.backends import judge_backend
from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.transport.request import ChatClient

__all__: list[str] = []


@judge_backend("direct")
def _direct_backend(
    config: JudgeConfig, *, api_base: str | None, api_key: SecretStr | None, max_connections: int
) -> ChatClient:
    from judgefuse.judges.transport.direct import DirectOpenAIClient

    if not api_base:
        raise ValueError(f"judge {config.name!r}: the direct backend needs api_base")
    return DirectOpenAIClient(api_base=api_base, api_key=api_key, max_connections=max_connections)


@judge_backend("litellm")
def _litellm_backend(
    config: JudgeConfig, *, api_base: str | None, api_key: SecretStr | None, max_connections: int
) -> ChatClient:
    from judgefuse.judges.transport.litellm_client import LiteLLMClient

    if api_key is None and api_base is not None:
        # A custom endpoint with no api_key_env is taken as unauthenticated (a local server, a
        # private vLLM); litellm's OpenAI path refuses to send without some key.
        api_key = SecretStr("none")
    return LiteLLMClient(api_base=api_base, api_key=api_key, max_connections=max_connections)
