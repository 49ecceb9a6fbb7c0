"""The verdict's JSON schema, for backends that can constrain their output to it.

SC and fuser replies are JSON with ``selected_output`` (``Output (a)`` / ``Output (b)``),
``confidence_score`` (an integer 0-100) and ``explanation`` (the format of "Overconfidence in LLM-as-a-Judge"). Sent as an
OpenAI-style ``response_format`` (OpenAI, vLLM, llama.cpp's server all accept it), the model
cannot answer anything :func:`~judgefuse.prompts.parse_judgment` fails to read: small local
models that ramble or forget the JSON are held to it by the sampler, not by the prompt.
"""

from __future__ import annotations

from typing import Any

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "selected_output": {"type": "string", "enum": ["Output (a)", "Output (b)"]},
        "confidence_score": {"type": "integer", "minimum": 0, "maximum": 100},
        "explanation": {"type": "string"},
    },
    "required": ["selected_output", "confidence_score", "explanation"],
    "additionalProperties": False,
}


def verdict_response_format() -> dict[str, Any]:
    """The ``response_format`` request field constraining a reply to :data:`VERDICT_SCHEMA`."""
    return {"type": "json_schema", "json_schema": {"name": "verdict", "strict": True, "schema": VERDICT_SCHEMA}}
