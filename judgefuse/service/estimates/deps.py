"""The estimates slice's FastAPI dependency: calibration and population estimates.

(:func:`judgefuse.service.web.deps.gateway_part`: read from the composition root by name.)
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from judgefuse.service.estimates.service import CalibrationService
from judgefuse.service.web.deps import gateway_part

__all__ = ["CalibrationDep", "get_calibration"]

get_calibration = gateway_part("calibration")
CalibrationDep = Annotated[CalibrationService, Depends(get_calibration)]
