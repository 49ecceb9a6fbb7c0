"""The fusion-method registry: one Protocol, a decorator that registers factories, a lookup.

In the style of inspect_ai's registries: a method is anything with a ``name`` that turns a
panel's votes into a :class:`~judgefuse.fusion.verdict.Verdict`; ``@fusion_method("name")``
registers a *factory* (a class or a function taking keyword options and returning a method);
``get_method(name, **options)`` builds one. Collisions are refused loudly.

Recalibration composes with any registered method (see :mod:`judgefuse.fusion.recalibrated`)::

    get_method("majority", recalibrate="isotonic")   # same as
    get_method("majority+isotonic")

The recalibrator names are ``platt``, ``temperature``, ``isotonic`` and ``histogram``
(:data:`judgefuse.calibration.recalibration.RECALIBRATORS`); ``+`` is reserved for this and
cannot appear in a registered name. ``recalibrate_options`` (a dict) is passed to the
recalibrator's constructor; every other option goes to the base method's factory.

Methods from other distributions come through the ``judgefuse.fusion_methods`` entry-point
group (:mod:`judgefuse.entry_points`): loaded after the built-ins, on the first lookup or
listing. A plugin module only imports :func:`fusion_method` and decorates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, Self, TypeVar, runtime_checkable

from judgefuse.entry_points import load_group, origin
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote


class FusionError(Exception):
    """Base class of the fusion room's errors."""


class UnknownFusionMethod(FusionError, KeyError):
    """``get_method`` was asked for a name nobody registered."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


class DuplicateFusionMethod(FusionError, ValueError):
    """Two factories tried to register under the same name."""


class NotEnoughLabels(FusionError, ValueError):
    """A learned method cannot be fitted on these labels (too few, or a single class).

    The caller is expected to fall back to a voting method.
    """


class NotFitted(FusionError, RuntimeError):
    """A learned method was called before ``fit``."""


@runtime_checkable
class FusionMethod(Protocol):
    """Turns one item's votes into a verdict. Must never raise on invalid votes."""

    name: str

    def __call__(self, votes: Sequence[JudgeVote]) -> Verdict: ...


@runtime_checkable
class LearnedFusionMethod(FusionMethod, Protocol):
    """A fusion method fitted on labelled batches (one batch = one item's votes)."""

    requires_fit: bool

    def fit(
        self, batches: Sequence[Sequence[JudgeVote]], labels: Sequence[Literal["A", "B"]]
    ) -> Self: ...


def requires_fit(method: object) -> bool:
    """True when ``method`` must be fitted before use (voting methods need not)."""
    return bool(getattr(method, "requires_fit", False))


Factory = Callable[..., FusionMethod]
F = TypeVar("F", bound=Callable[..., Any])

_REGISTRY: dict[str, Factory] = {}
_ORIGINS: dict[str, str] = {}
_BUILTINS_LOADED = False
ENTRY_POINT_GROUP = "judgefuse.fusion_methods"


def fusion_method(name: str) -> Callable[[F], F]:
    """Register the decorated factory (class or function) under ``name``.

    Raises :class:`DuplicateFusionMethod` when the name is taken and ``ValueError`` when the
    name is empty or contains ``+`` (reserved for ``base+recalibrator``).
    """
    if not name or not name.strip() or name != name.strip():
        raise ValueError(f"invalid fusion method name {name!r}")
    if "+" in name:
        raise ValueError(f"fusion method name {name!r} may not contain '+' (reserved)")

    def decorate(factory: F) -> F:
        if name in _REGISTRY:
            existing = _REGISTRY[name]
            raise DuplicateFusionMethod(
                f"fusion method {name!r} is already registered "
                f"(by {getattr(existing, '__module__', '?')}."
                f"{getattr(existing, '__qualname__', repr(existing))}); "
                f"refusing to replace it with {getattr(factory, '__qualname__', repr(factory))}"
            )
        _REGISTRY[name] = factory
        _ORIGINS[name] = origin(getattr(factory, "__module__", None))
        return factory

    return decorate


def _load_builtins() -> None:
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        # Imported for their registrations.
        from judgefuse.fusion import dawid_skene, fuser, stacking, voting  # noqa: F401
    load_group(ENTRY_POINT_GROUP)


def available_methods() -> list[str]:
    """Every registered method name, sorted (recalibrated combinations are not listed)."""
    _load_builtins()
    return sorted(_REGISTRY)


def method_origins() -> dict[str, str]:
    """Method name -> where it was registered (``built-in`` or a plugin's distribution)."""
    _load_builtins()
    return {name: _ORIGINS[name] for name in sorted(_REGISTRY)}


def replayable_methods() -> list[str]:
    """Registered methods that fuse recorded votes alone, without calling a model.

    The fuser LLM needs the item and a live model (its factory says ``requires_item``), so an
    offline replay of recorded judgments cannot run it.
    """
    return [name for name in available_methods() if not getattr(_REGISTRY[name], "requires_item", False)]


def get_method(name: str, **options: Any) -> FusionMethod:
    """Build the method registered as ``name`` with ``options``.

    ``"base+recal"`` or ``recalibrate="recal"`` wraps the base in
    :class:`~judgefuse.fusion.recalibrated.Recalibrated`.
    """
    _load_builtins()
    recalibrate = options.pop("recalibrate", None)
    recalibrate_options = options.pop("recalibrate_options", None) or {}
    if "+" in name:
        base_name, _, recal_name = name.partition("+")
        if recalibrate is not None and recalibrate != recal_name:
            raise ValueError(
                f"conflicting recalibrators: name {name!r} and recalibrate={recalibrate!r}"
            )
        name, recalibrate = base_name, recal_name
    if name not in _REGISTRY:
        raise UnknownFusionMethod(
            f"unknown fusion method {name!r}; known methods: {', '.join(available_methods())}"
        )
    method = _REGISTRY[name](**options)
    if recalibrate is None:
        return method
    from judgefuse.calibration.recalibration import make_recalibrator
    from judgefuse.fusion.recalibrated import Recalibrated

    return Recalibrated(method, make_recalibrator(recalibrate, **recalibrate_options))


def factory_of(name: str) -> Factory:
    """The factory registered as ``name`` (its base, for ``base+recalibrator``), unbuilt.

    Lets callers read what a method declares (``requires_fit``, ``requires_item``,
    ``from_params``) without building it (:mod:`judgefuse.fusion.capabilities`).
    Raises :class:`UnknownFusionMethod`.
    """
    _load_builtins()
    base = name.partition("+")[0]
    if base not in _REGISTRY:
        raise UnknownFusionMethod(
            f"unknown fusion method {name!r}; known methods: {', '.join(available_methods())}"
        )
    return _REGISTRY[base]
