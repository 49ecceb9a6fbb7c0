"""The Redis backend: :class:`RedisStorage` (state shared between gateway replicas).

:mod:`.backend` is the storage (key naming, atomicity, retention: see its docstring); ``lua/``
holds its server-side scripts, one file each, loaded with :func:`~.backend.lua`. Importing this
package needs the ``redis`` distribution.
"""

from judgefuse.service.storage.redis.backend import (
    RECORDS_INDEXED_KEY,
    TENANTS_KEY,
    RedisStorage,
    lua,
    redact_url,
)

__all__ = ["RECORDS_INDEXED_KEY", "TENANTS_KEY", "RedisStorage", "lua", "redact_url"]
