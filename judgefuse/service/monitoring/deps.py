"""The monitoring slice's FastAPI dependency: precision monitors and drift.

(:func:`judgefuse.service.web.deps.gateway_part`: read from the composition root by name.)
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from judgefuse.service.monitoring.service import MonitorService
from judgefuse.service.web.deps import gateway_part

__all__ = ["MonitoringDep", "get_monitoring"]

get_monitoring = gateway_part("monitoring")
MonitoringDep = Annotated[MonitorService, Depends(get_monitoring)]
