"""A started panel plus the fusion methods the gateway may use with it (and its cascade, if any).

A panel whose YAML declares ``cascade:`` is served as a cascade by ``POST /v1/judge``
(:meth:`judgefuse.service.gateway.Gateway.judge`). The stage thresholds are read from the YAML
as they are: tune them offline with ``judgefuse tune --cascade J1,J2,...`` on labelled data
(fixed-sequence Clopper-Pearson per stage) and paste the printed thresholds into the file.
The fallback panel (``cascade_fallback: panel``) is fused with the panel's configured voting
method (``settings.fusion_method`` or the file's ``fusion``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from judgefuse.fusion import FusionMethod, available_methods, get_method, requires_fit
from judgefuse.fusion.cascade import Cascade, cascade_from_config
from judgefuse.judges.panel import Panel
from judgefuse.service.errors import FieldProblem

__all__ = ["PanelRuntime"]


class PanelRuntime:
    """A started panel plus its fusion methods (voting ones built once, the fuser if any)."""

    def __init__(
        self, panel: Panel, *, fusion_method: str | None, environ: Mapping[str, str] | None = None
    ) -> None:
        self.panel = panel
        self.name = panel.name
        self.default_method = fusion_method or panel.config.fusion
        self._methods: dict[str, FusionMethod] = {}
        self.fuser: Any = None
        if self.default_method == "fuser" or panel.config.fuser is not None:
            from judgefuse.fusion import fuser as _fuser  # noqa: F401  (registers "fuser")

            if panel.config.fuser is None:
                raise ValueError(f"panel {self.name!r}: fusion 'fuser' needs a 'fuser:' entry")
            from judgefuse.judges.judge import Judge

            # built here so its API key is read from the same environment as the panel's
            self.fuser = get_method("fuser", judge=Judge.from_config(panel.config.fuser, environ=environ))
        if self.default_method not in ("fuser", "stacked"):
            self.method(self.default_method, field="settings.fusion_method")
        elif self.default_method == "stacked":
            raise ValueError(
                f"panel {self.name!r}: 'stacked' cannot be the configured method (it is fitted "
                "from labels and promoted automatically): configure a voting method"
            )
        self.cascade: Cascade | None = self._cascade()

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
        if name == "fuser":
            raise ValueError(
                f"panel {self.name!r}: {where}: 'fuser' is not a voting method; a cascade stage "
                "fuses with a voting method (majority, confidence_weighted, ...)"
            )
        try:
            method = get_method(name)
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"panel {self.name!r}: {where}: {exc}") from None
        if requires_fit(method) or getattr(method, "requires_item", False):
            raise ValueError(
                f"panel {self.name!r}: {where}: {name!r} is not a voting method; a cascade "
                "stage fuses with a voting method (majority, confidence_weighted, ...)"
            )

    def method(self, name: str, *, field: str = "body.method") -> FusionMethod:
        """A ready voting method (or the fuser); FieldProblem for anything else."""
        cached = self._methods.get(name)
        if cached is not None:
            return cached
        if name == "fuser":
            if self.fuser is None:
                raise FieldProblem(field, f"panel {self.name!r} has no fuser model configured")
            return self.fuser
        base = name.partition("+")[0]
        if base not in available_methods():
            raise FieldProblem(
                field, f"unknown fusion method {name!r}; known: {', '.join(available_methods())}"
            )
        try:
            method = get_method(name)
        except (KeyError, ValueError, TypeError) as exc:  # e.g. "majority+" (no recalibrator)
            raise FieldProblem(field, f"unknown fusion method {name!r}: {exc}") from None
        if requires_fit(method) or getattr(method, "requires_item", False):
            raise FieldProblem(
                field,
                f"method {name!r} must be fitted; the service fits only 'stacked' "
                "(POST /v1/fusion/refit) — use it or a voting method",
            )
        self._methods[name] = method
        return method

    async def aclose(self) -> None:
        if self.fuser is not None:
            await self.fuser.aclose()
