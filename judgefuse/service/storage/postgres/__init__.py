"""The PostgreSQL backend: :class:`PostgresStorage` (``postgresql://`` and ``postgres://``).

:mod:`.backend` is the storage (pool, transactions, retries; durability in its docstring); one
job each: :mod:`.schema` (tables, versioned migrations), :mod:`.partitions` (day partitions on
demand), :mod:`.accumulators`, :mod:`.review`, :mod:`.retention` (retention and export scans),
:mod:`.errors` (SQLSTATE -> storage error, password redaction). Importing this package needs
psycopg and psycopg_pool.
"""

from judgefuse.service.storage.postgres.backend import (
    SCHEMA_VERSION,
    PostgresStorage,
    split_pool_params,
)

__all__ = ["SCHEMA_VERSION", "PostgresStorage", "split_pool_params"]
