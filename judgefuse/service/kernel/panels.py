"""A started panel plus the fusion methods the gateway may use with it (and its cascade, if any).

A panel whose YAML declares ``cascade:`` is served as a cascade by ``POST /v1/judge``
(:meth:`judgefuse.service.judging.pipeline.JudgePipeline.judge`). The stage thresholds are read from the YAML
as they are: tune them offline with ``judgefuse tune --cascade J1,J2,...`` on labelled data
(fixed-sequence Clopper-Pearson per stage) and paste the printed thresholds into the file.
The fallback panel (``cascade_fallback: panel``) is fused with the panel's configured voting
method (``settings.judging.fusion_method`` or the file's ``fusion``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

from judgefuse.fusion import FusionMethod, available_methods, get_method, requires_fit
from judgefuse.fusion.capabilities import (
    DEFAULT_VOTING_METHOD,
    ITEM_METHOD,
    Capabilities,
    ItemFusionMethod,
    known_capabilities,
    reads_item,
)
from judgefuse.fusion.cascade import Cascade, cascade_from_config
from judgefuse.judges.panel import Panel
from judgefuse.service.errors import FieldProblem

__all__ = ["PanelRuntime", "find_runtime"]


class PanelRuntime:
    """A started panel plus its fusion methods (voting ones built once, the item-reading one if
    the panel file has a ``fuser:`` model). Every decision asks the method what it is
    (:func:`judgefuse.fusion.capabilities.capabilities`), never its name."""

    def __init__(
        self, panel: Panel, *, fusion_method: str | None, environ: Mapping[str, str] | None = None
    ) -> None:
        self.panel = panel
        self.name = panel.name
        self.default_method = fusion_method or panel.config.fusion
        self._methods: dict[str, FusionMethod] = {}
        self._reads_item: dict[str, bool] = {}
        self.fuser: Any = None
        """The item-reading method built from the panel's ``fuser:`` model entry, if any."""
        default = self.capabilities(self.default_method, field="settings.judging.fusion_method")
        if default.reads_item or panel.config.fuser is not None:
            if panel.config.fuser is None:
                raise ValueError(
                    f"panel {self.name!r}: fusion {self.default_method!r} reads the item with a "
                    "model and needs a 'fuser:' entry"
                )
            from judgefuse.judges.judge import Judge

            # built here so its API key is read from the same environment as the panel's
            self.fuser = get_method(
                self.default_method if default.reads_item else ITEM_METHOD,
                judge=Judge.from_config(panel.config.fuser, environ=environ),
            )
        if default.requires_fit:
            raise ValueError(
                f"panel {self.name!r}: {self.default_method!r} cannot be the configured method "
                "(it is fitted from labels and promoted automatically): configure a voting method"
            )
        if not default.reads_item:
            self.method(self.default_method, field="settings.judging.fusion_method")
        self.cold_start: str | None = self.default_method if default.cold_start else None
        """The configured method when it is fitted without labels (``dawid_skene``): the
        gateway fits it on the panel's stored votes (:mod:`judgefuse.service.learning.cold_start`) and,
        until then, serves the method unfitted (its cold-start rule, with a note)."""
        self.cascade: Cascade | None = self._cascade()

    def capabilities(self, name: str, *, field: str = "body.method") -> Capabilities:
        """What method ``name`` declares; FieldProblem naming ``field`` when it is unknown."""
        found = known_capabilities(name)
        if found is None:
            raise FieldProblem(
                field, f"unknown fusion method {name!r}; known: {', '.join(available_methods())}"
            )
        return found

    def is_learned(self, name: str) -> bool:
        """True when ``name`` is a registered method served from a stored fit (fitted from
        labels, or without them as a cold start), never built fresh here; False for unknown
        names (``method`` reports them)."""
        found = known_capabilities(name)
        return found is not None and found.served_from_model

    @property
    def voting_method(self) -> str:
        """The configured method when it is a voting one, else the default voting method (what a
        learned candidate is compared with, and what an item-reading method falls back to)."""
        found = known_capabilities(self.default_method)
        return self.default_method if found is not None and found.voting else DEFAULT_VOTING_METHOD

    def _cascade(self) -> Cascade | None:
        """The panel file's cascade, its stage methods checked now (a bad name fails startup)."""
        cascade = cascade_from_config(self.panel.config)
        if cascade is None:
            return None
        for index, stage in enumerate(cascade.stages):
            if len(stage.judges) > 1:
                self._voting(stage.method, f"cascade[{index}].method")
        if cascade.fallback == "panel":
            self._voting(self.default_method, "fusion (the cascade's fallback panel)")
            cascade = replace(cascade, panel_method=self.default_method)
        return cascade

    def _voting(self, name: str, where: str) -> None:
        found = known_capabilities(name)
        if found is None:
            try:
                get_method(name)  # for the registry's own message
            except (KeyError, ValueError, TypeError) as exc:
                raise ValueError(f"panel {self.name!r}: {where}: {exc}") from None
            raise ValueError(f"panel {self.name!r}: {where}: unknown fusion method {name!r}")
        if not found.voting:
            raise ValueError(
                f"panel {self.name!r}: {where}: {name!r} is not a voting method; a cascade "
                "stage fuses with a voting method (majority, confidence_weighted, ...)"
            )
        try:
            get_method(name)
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"panel {self.name!r}: {where}: {exc}") from None

    def method(self, name: str, *, field: str = "body.method") -> FusionMethod:
        """A ready voting method (or the panel's item-reading one); FieldProblem for anything else."""
        cached = self._methods.get(name)
        if cached is not None:
            return cached
        found = self.capabilities(name, field=field)
        if found.reads_item:
            if self.fuser is None or self.fuser.name != name:
                raise FieldProblem(
                    field, f"panel {self.name!r} has no {name!r} model configured (a 'fuser:' entry)"
                )
            return cast(FusionMethod, self.fuser)
        try:
            method = get_method(name)
        except (KeyError, ValueError, TypeError) as exc:  # e.g. "majority+" (no recalibrator)
            raise FieldProblem(field, f"unknown fusion method {name!r}: {exc}") from None
        if requires_fit(method) or reads_item(method):
            raise FieldProblem(
                field,
                f"method {name!r} must be fitted; the service fits only learned methods it can "
                "refit from labels (POST /v1/fusion/refit) — use the promoted one or a voting method",
            )
        self._methods[name] = method
        return method

    def is_item_method(self, name: str, method: FusionMethod) -> bool:
        """Whether ``method`` (what :meth:`method` returned for ``name``) reads the item, asked
        once per name: ``isinstance`` against a runtime-checkable Protocol walks the protocol's
        members on every call, and :meth:`method` returns the same object for a name."""
        found = self._reads_item.get(name)
        if found is None:
            found = self._reads_item[name] = isinstance(method, ItemFusionMethod)
        return found

    async def aclose(self) -> None:
        if self.fuser is not None:
            await self.fuser.aclose()


def find_runtime(panels: Mapping[str, PanelRuntime], name: str, *, field: str) -> PanelRuntime:
    """The panel called ``name``; FieldProblem naming ``field`` (and the panels there are) else."""
    runtime = panels.get(name)
    if runtime is None:
        raise FieldProblem(field, f"unknown panel {name!r}; panels: {', '.join(panels)}")
    return runtime
