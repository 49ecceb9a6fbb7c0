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

The table is a :class:`judgefuse.registry.Registry`. The built-in methods register themselves
from their own modules (:data:`BUILTIN_MODULES`), which the registry imports by path on the
first lookup or listing: they import this module to register, so this module never imports
them. :class:`~judgefuse.fusion.recalibrated.Recalibrated` is one of them: it cross-fits
through :func:`get_method`, so it hands itself to this module with
:func:`recalibration_wrapper` instead of being imported here.

Methods from other distributions come through the ``judgefuse.fusion_methods`` entry-point
group (:mod:`judgefuse.entry_points`): loaded after the built-ins, on the first lookup or
listing. A plugin module only imports :func:`fusion_method` and decorates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, Self, TypeVar, runtime_checkable

from judgefuse.errors import InputError, JudgefuseError
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote
from judgefuse.registry import DuplicateEntry, Registry, UnknownEntry, plain_name

if TYPE_CHECKING:  # numpy and the recalibrators load when a method is first recalibrated
    from judgefuse.calibration.recalibration import Recalibrator


class FusionError(JudgefuseError):
    """Base class of the fusion room's errors."""


class UnknownFusionMethod(FusionError, UnknownEntry):
    """``get_method`` was asked for a name nobody registered (an input error and a ``KeyError``)."""


class UnknownRecalibrator(FusionError, InputError, ValueError):
    """``base+recalibrator`` names a recalibrator that does not exist."""


class DuplicateFusionMethod(FusionError, DuplicateEntry):
    """Two factories tried to register under the same name (a ``ValueError``)."""


class NotEnoughLabels(FusionError, InputError, ValueError):
    """A learned method cannot be fitted on these labels (too few, or a single class).

    The caller is expected to fall back to a voting method; where it cannot (an offline run
    asked for this method on these labels), the labels given are what cannot be used.
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
Wrapper = Callable[[FusionMethod, "Recalibrator"], FusionMethod]
"""``(base, recalibrator) -> method``: what ``base+recalibrator`` names."""

ENTRY_POINT_GROUP = "judgefuse.fusion_methods"
BUILTIN_MODULES = (
    "judgefuse.fusion.voting",
    "judgefuse.fusion.stacking",
    "judgefuse.fusion.offset_stacking",
    "judgefuse.fusion.dawid_skene",
    "judgefuse.fusion.fuser",
    "judgefuse.fusion.recalibrated",
    "judgefuse.fusion.auto",
)
"""The modules that register the built-in methods (and the recalibration wrapper)."""


def _no_plus(name: str) -> str | None:
    if "+" in name:
        return f"fusion method name {name!r} may not contain '+' (reserved)"
    return plain_name("fusion method")(name)


METHODS: Registry[Factory] = Registry(
    "fusion method", group=ENTRY_POINT_GROUP, builtins=BUILTIN_MODULES, name_rule=_no_plus,
    duplicate=DuplicateFusionMethod, unknown=UnknownFusionMethod,
)
"""Method name -> factory (a class or a function taking keyword options)."""

_wrappers: list[Wrapper] = []
"""What ``base+recalibrator`` wraps the base with: set once, by a built-in module."""


def fusion_method(name: str) -> Callable[[F], F]:
    """Register the decorated factory (class or function) under ``name``.

    Raises :class:`DuplicateFusionMethod` when the name is taken and ``ValueError`` when the
    name is empty or contains ``+`` (reserved for ``base+recalibrator``).
    """
    METHODS.check_name(name)

    def decorate(factory: F) -> F:
        METHODS.register(name, factory)
        return factory

    return decorate


W = TypeVar("W", bound=Wrapper)


def recalibration_wrapper(wrapper: W) -> W:
    """Install what wraps a base method for ``base+recalibrator`` (one, the built-in
    :class:`~judgefuse.fusion.recalibrated.Recalibrated`, which decorates itself)."""
    if _wrappers:
        raise DuplicateFusionMethod(f"the recalibration wrapper is already {_wrappers[0]!r}")
    _wrappers.append(wrapper)
    return wrapper


def available_methods() -> list[str]:
    """Every registered method name, sorted (recalibrated combinations are not listed)."""
    return METHODS.names()


def method_origins() -> dict[str, str]:
    """Method name -> where it was registered (``built-in`` or a plugin's distribution)."""
    return METHODS.origins()


def replayable_methods() -> list[str]:
    """Registered methods that fuse recorded votes alone, without calling a model.

    The fuser LLM needs the item and a live model (its factory says ``requires_item``), so an
    offline replay of recorded judgments cannot run it.
    """
    return [name for name in available_methods() if not getattr(METHODS.get(name), "requires_item", False)]


def get_method(name: str, **options: Any) -> FusionMethod:
    """Build the method registered as ``name`` with ``options``.

    ``"base+recal"`` or ``recalibrate="recal"`` wraps the base in
    :class:`~judgefuse.fusion.recalibrated.Recalibrated`.
    """
    recalibrate = options.pop("recalibrate", None)
    recalibrate_options = options.pop("recalibrate_options", None) or {}
    if "+" in name:
        base_name, _, recal_name = name.partition("+")
        if recalibrate is not None and recalibrate != recal_name:
            raise ValueError(
                f"conflicting recalibrators: name {name!r} and recalibrate={recalibrate!r}"
            )
        name, recalibrate = base_name, recal_name
    method = METHODS.get(name)(**options)
    if recalibrate is None:
        return method
    from judgefuse.calibration.recalibration import RECALIBRATORS, make_recalibrator

    if recalibrate not in RECALIBRATORS:
        raise UnknownRecalibrator(
            f"unknown recalibrator {recalibrate!r}; known: {', '.join(sorted(RECALIBRATORS))}"
        )
    (wrap,) = _wrappers  # installed by a built-in module: METHODS.get imported them
    return wrap(method, make_recalibrator(recalibrate, **recalibrate_options))


def factory_of(name: str) -> Factory:
    """The factory registered as ``name`` (its base, for ``base+recalibrator``), unbuilt.

    Lets callers read what a method declares (``requires_fit``, ``requires_item``,
    ``from_params``) without building it (:mod:`judgefuse.fusion.capabilities`).
    Raises :class:`UnknownFusionMethod`.
    """
    factory = METHODS.find(name.partition("+")[0])
    if factory is None:
        raise METHODS.unknown_error(name)
    return factory
