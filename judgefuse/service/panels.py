"""A started panel plus the fusion methods the gateway may use with it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from judgefuse.fusion import FusionMethod, available_methods, get_method, requires_fit
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
        method = get_method(name)
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
