"""The judging slice's FastAPI dependency: its service, the judge pipeline.

(:func:`judgefuse.service.web.deps.gateway_part`: read from the composition root by name.)
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from judgefuse.service.judging.pipeline import JudgePipeline
from judgefuse.service.web.deps import gateway_part

__all__ = ["JudgingDep", "get_judging"]

get_judging = gateway_part("judging")
JudgingDep = Annotated[JudgePipeline, Depends(get_judging)]
