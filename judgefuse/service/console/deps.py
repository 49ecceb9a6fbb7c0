"""The console slice's FastAPI dependency: the gateway itself.

The console (and its dashboard) shows every slice at once, so it reads them through the
composition root; it is the one slice above the gateway (docs/design.md, 'Architecture').
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from judgefuse.service.gateway import Gateway

__all__ = ["GatewayDep", "get_gateway"]


async def get_gateway(request: Request) -> Gateway:
    return request.app.state.gateway


GatewayDep = Annotated[Gateway, Depends(get_gateway)]
