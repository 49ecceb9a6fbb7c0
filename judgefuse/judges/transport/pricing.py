"""Per-token prices from litellm's price table, looked up once per model.

Cost is ``prompt_tokens * input price + completion_tokens * output price``: a dict lookup and
two multiplications per call, instead of litellm's per-call cost calculator. The table is
``litellm.model_cost`` when litellm is already imported (so prices registered there count);
otherwise the JSON file litellm ships is read directly, so the direct client does not pay
litellm's multi-second import just to price a call. Unknown models (local servers, stubs) cost 0.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from pathlib import Path
from typing import Any

__all__ = ["cost_usd", "token_prices"]

_TABLE_FILE = "model_prices_and_context_window_backup.json"
_lock = threading.Lock()
_table: dict[str, Any] | None = None
_prices: dict[str, tuple[float, float]] = {}


def _load_table() -> dict[str, Any]:
    litellm = sys.modules.get("litellm")
    model_cost = getattr(litellm, "model_cost", None) if litellm is not None else None
    if isinstance(model_cost, dict) and model_cost:
        return model_cost
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    for location in spec.submodule_search_locations:
        path = Path(location) / _TABLE_FILE
        if path.is_file():
            with path.open(encoding="utf-8") as handle:
                loaded = json.load(handle)
            return loaded if isinstance(loaded, dict) else {}
    return {}


def _entry_prices(entry: Any) -> tuple[float, float] | None:
    if not isinstance(entry, dict):
        return None
    try:
        return float(entry.get("input_cost_per_token") or 0.0), float(entry.get("output_cost_per_token") or 0.0)
    except (TypeError, ValueError):
        return None


def token_prices(model: str) -> tuple[float, float]:
    """(USD per input token, USD per output token) for ``model``; (0, 0) when unknown.

    ``model`` is tried as given, then without a ``provider/`` prefix ("openai/gpt-4o-mini").
    """
    cached = _prices.get(model)
    if cached is not None:
        return cached
    global _table
    with _lock:
        if _table is None:
            _table = _load_table()
        table = _table
    candidates = [model]
    if "/" in model:
        candidates.append(model.split("/", 1)[1])
    prices = (0.0, 0.0)
    for name in candidates:
        found = _entry_prices(table.get(name))
        if found is not None:
            prices = found
            break
    _prices[model] = prices
    return prices


def cost_usd(model: str, prompt_tokens: int, completion_tokens: int) -> float:
    """The cost of one call from its token counts."""
    input_price, output_price = token_prices(model)
    return prompt_tokens * input_price + completion_tokens * output_price
