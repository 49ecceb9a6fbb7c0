"""What a fusion method needs and offers, so callers ask the method instead of its name.

The service and the offline commands must not branch on method names (a plugin's learned
method would be refused, a renamed one would break them). Each registered factory declares:

* ``requires_fit`` (class attribute): it is fitted on labelled batches before use;
* ``requires_item``: it reads the item text as well as the votes and is awaited as
  ``afuse(item, votes, tenant=...)`` (the fuser LLM);
* ``fits_unlabelled``: it is fitted on unlabelled batches (``fit_unlabelled``), e.g.
  ``dawid_skene``. Unfitted it still answers (a cold-start rule), so a panel may configure it;
  the service fits it in the background on the panel's stored votes and serves the fit (its
  **cold start**: :attr:`Capabilities.cold_start`);
* ``to_params()`` / classmethod ``from_params(params)``: its fitted state can be saved as JSON
  and restored (what the service stores in a model record). ``base+recalibrator`` saves and
  restores through :class:`~judgefuse.fusion.recalibrated.Recalibrated` when its base does, or
  when its base is a voting method (nothing of the base to save);

and a method that requires a fit, has parameters to save, and is built without options can be
**refitted from labels** by the service (``auto``, ``dawid_skene+platt`` and ``stacked`` alike). :data:`REFIT_METHOD` names the learned method the
service fits by default, :data:`LEARNED_METHOD` the one a stored model that names none was
fitted with, :data:`ITEM_METHOD` the item-reading method a panel's ``fuser:`` entry
builds, :data:`DEFAULT_VOTING_METHOD` the voting method used where a voting one is needed and
the configured one is not.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from judgefuse.fusion.registry import FusionMethod, UnknownFusionMethod, factory_of
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote, PairwiseItem

__all__ = [
    "DEFAULT_VOTING_METHOD",
    "ITEM_METHOD",
    "LEARNED_METHOD",
    "REFIT_METHOD",
    "Capabilities",
    "ItemFusionMethod",
    "ParamsFusionMethod",
    "capabilities",
    "known_capabilities",
    "method_params",
    "reads_item",
    "restore_method",
]

REFIT_METHOD = "auto"
"""The learned method the service refits from its labels and promotes by default (the promotion
rule is the same for any method): ``auto``, the cross-validated choice among the voting rules,
``dawid_skene``, ``offset_stacked`` and ``stacked``, each with and without a recalibrator
(:mod:`judgefuse.fusion.auto`). It takes a more complex fuser than a vote count only where the
labels show it better beyond noise, and what it takes is calibrated out of sample. Why the
default (docs/results.md, "`auto`"): at 1,000 and 10,000 labels within 0.5 point of the best
row's accuracy in each of six synthetic regimes, the best row or within one standard error of
it on JudgeBench, Trust-or-Escalate and LLMBar; and a refit with it costs 1.9-2.0 s of CPU at
2,000 labels against ``offset_stacked``'s 3.2-4.2 s (the default before it), 6.8-7.9 s at
10,000 against 5.1-6.5 s (benchmarks/results/refit_method_cost.txt)."""
LEARNED_METHOD = "stacked"
"""The learned method of a stored model record that names none (saved before records named
their method, when the service refitted only ``stacked``)."""
ITEM_METHOD = "fuser"
"""The item-reading method built from a panel's ``fuser:`` model entry."""
DEFAULT_VOTING_METHOD = "majority"
"""The voting method used where a voting method is needed and none is configured."""


@runtime_checkable
class ItemFusionMethod(FusionMethod, Protocol):
    """A method that reads the item as well as the votes (and may call a model)."""

    requires_item: bool

    async def afuse(
        self, item: PairwiseItem, votes: Sequence[JudgeVote], *, tenant: str | None = None
    ) -> Verdict: ...


@runtime_checkable
class ParamsFusionMethod(FusionMethod, Protocol):
    """A fitted method whose state round-trips through JSON-ready parameters."""

    def to_params(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Capabilities:
    """What the method registered as ``name`` declares (see the module docstring)."""

    name: str
    requires_fit: bool
    reads_item: bool
    saves_params: bool
    refittable: bool
    fits_unlabelled: bool = False

    @property
    def voting(self) -> bool:
        """A pure function of the votes, usable with no fit and no item (cascade stages, re-fusing)."""
        return not self.requires_fit and not self.reads_item and not self.fits_unlabelled

    @property
    def cold_start(self) -> bool:
        """Fitted without labels and restorable: the service fits it on a panel's stored votes
        and serves the stored fit (a configured cold-start method)."""
        return self.fits_unlabelled and self.saves_params and not self.requires_fit

    @property
    def served_from_model(self) -> bool:
        """Its verdicts come from a stored fit (a promoted model), never from a fresh build."""
        return (self.requires_fit or self.fits_unlabelled) and self.saves_params


def _builds_without_options(factory: Any) -> bool:
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not inspect.Parameter.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in signature.parameters.values()
    )


@functools.lru_cache(maxsize=256)
def capabilities(name: str) -> Capabilities:
    """The capabilities of ``name`` (its base method for ``base+recalibrator``: recalibration
    adds a fit of its own). Raises :class:`~judgefuse.fusion.registry.UnknownFusionMethod`.

    Cached: a registered name's factory never changes (re-registering is refused), and an
    unknown name raises, which is not cached. The gateway asks on every request."""
    factory = factory_of(name)
    recalibrated = "+" in name
    fit = bool(getattr(factory, "requires_fit", False)) or recalibrated
    reads = bool(getattr(factory, "requires_item", False))
    unlabelled = bool(getattr(factory, "fits_unlabelled", False))
    base_saves = callable(getattr(factory, "from_params", None))
    base_voting = not getattr(factory, "requires_fit", False) and not reads and not unlabelled
    saves = (base_saves or base_voting) and not reads if recalibrated else base_saves
    return Capabilities(
        name=name,
        requires_fit=fit,
        reads_item=reads,
        saves_params=saves,
        refittable=fit and saves and _builds_without_options(factory),
        fits_unlabelled=unlabelled and not recalibrated,
    )


def known_capabilities(name: str) -> Capabilities | None:
    """:func:`capabilities`, or None for a name nobody registered (the caller reports it)."""
    try:
        return capabilities(name)
    except (UnknownFusionMethod, ValueError):
        return None


def reads_item(method: object) -> bool:
    """True when a built ``method`` must be awaited with the item (:class:`ItemFusionMethod`)."""
    return bool(getattr(method, "requires_item", False))


def method_params(method: FusionMethod) -> dict[str, Any]:
    """The JSON-ready parameters of a fitted method (``TypeError`` when it has none)."""
    if not isinstance(method, ParamsFusionMethod):
        raise TypeError(f"fusion method {method.name!r} has no parameters to save (no to_params)")
    return method.to_params()


def restore_method(name: str, params: Mapping[str, Any]) -> FusionMethod:
    """The fitted method ``name`` rebuilt from :func:`method_params` output (``base+recalibrator``
    through :meth:`~judgefuse.fusion.recalibrated.Recalibrated.from_params`)."""
    factory = factory_of(name)
    if "+" in name:
        if not capabilities(name).saves_params:
            raise TypeError(f"fusion method {name!r} cannot be restored from parameters")
        from judgefuse.fusion.recalibrated import Recalibrated

        return Recalibrated.from_params(params)
    from_params = getattr(factory, "from_params", None)
    if not callable(from_params):
        raise TypeError(f"fusion method {name!r} cannot be restored from parameters (no from_params)")
    method = from_params(params)
    if not isinstance(method, FusionMethod):
        raise TypeError(f"{name!r}.from_params returned {type(method).__name__}, not a fusion method")
    return method
