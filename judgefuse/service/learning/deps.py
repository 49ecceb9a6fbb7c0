"""The learning slice's FastAPI dependency: tuning, refit and cold start.

(:func:`judgefuse.service.web.deps.gateway_part`: read from the composition root by name.)
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from judgefuse.service.learning.service import LearningService
from judgefuse.service.web.deps import gateway_part

__all__ = ["LearningDep", "get_learning"]

get_learning = gateway_part("learning")
LearningDep = Annotated[LearningService, Depends(get_learning)]
