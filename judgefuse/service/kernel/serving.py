"""What the slices around judging read from the serving side, as protocols.

The review, estimates, learning and monitoring services need a panel by name (with the 422
naming the request field that held it), and some of them the state new verdicts are decided
with (latest threshold, promoted model, active method). The :class:`~judgefuse.service.gateway.Gateway`
has all of it and hands itself to the services it builds; typing them against these protocols
instead of the class keeps those slices from importing the gateway (which imports them), so
the composition root stays the only place that knows every slice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from judgefuse.service.kernel.panels import PanelRuntime
    from judgefuse.service.storage import ModelRecord, ThresholdRecord

__all__ = ["PanelDirectory", "PanelLookup", "ServingState"]


class PanelLookup(Protocol):
    def runtime(self, name: str | None, *, field: str = "body.panel") -> PanelRuntime:
        """The panel ``name`` (the default panel when None); a 422 naming ``field`` if unknown."""
        ...


class PanelDirectory(PanelLookup, Protocol):
    """A panel by name and every panel there is: what a route of any slice needs of the gateway."""

    @property
    def panels(self) -> Mapping[str, PanelRuntime]:
        """Every started panel, by name, in the order of the settings."""
        ...


class ServingState(PanelLookup, Protocol):
    async def threshold(self, tenant: str, panel: str) -> ThresholdRecord | None:
        """The latest threshold of (tenant, panel), as routing sees it (cached)."""
        ...

    async def model(self, tenant: str, panel: str) -> tuple[ModelRecord, Any] | None:
        """The promoted learned model of (tenant, panel), restored, or None (cached)."""
        ...

    async def active_method(self, tenant: str, runtime: PanelRuntime) -> tuple[str, str | None]:
        """(method name, model version) new verdicts of (tenant, panel) get by default."""
        ...
