"""The PostgreSQL backend's schema: tables, indexes, versioned migrations, applied on open.

Verdicts
--------
``verdicts(created_at, tenant, id, panel, label, labelled_at, body)`` is range-partitioned by
day on ``created_at`` (epoch seconds, ``float8``): one partition ``verdicts_d<day>`` per UTC
day, created on demand (:mod:`.partitions`), plus ``verdicts_default`` for the rows a
retention pass kept from days whose partition it dropped (:mod:`.retention`). A
partitioned table's unique keys must contain the partition key, so ``verdicts``' primary key is
(created_at, tenant, id) (it also orders ``iter_records``), and ``verdict_ids(tenant, id,
created_at)`` holds the (tenant, id) uniqueness and says where a record lives: every
read of one record is two primary-key lookups, and every write of one record first locks its
``verdict_ids`` row (``FOR UPDATE``), which serialises writers of one id without locking the
partitioned table. ``body`` is the record's JSON as text (compared byte for byte by a retried
``save_verdict``). Every text column sorts by code point (``COLLATE "C"``), whatever the
database's locale, so ids order as they do in SQLite and Redis.

Accumulators
------------
``acc_total(tenant, key, field, ival, fval, is_float)`` and ``acc_hour(..., hour, ...)``: an
integer delta adds to ``ival`` (``bigint``: an overflow is an error, mapped to
:class:`AccumulatorOverflow`, and the transaction rolls back), a float delta to ``fval`` and sets
``is_float``; a field reads as ``ival`` while ``is_float`` is false, else ``ival + fval`` as a
float (SQLite's typing: ints stay exact, a field that ever got a float is a float).

The rest mirrors SQLite: ``review_queue``/``review_counts`` (the review loop), ``leases``,
``state_blobs``, versioned ``thresholds``/``models``/``monitor_events`` numbered through
``version_counters`` (one row per (kind, tenant, panel), incremented by an upsert, so two
writers never get the same version), ``verdict_claims`` (single-flight leases, timed by the
server's clock) and ``meta`` (the retention watermark).

Versions
--------
1: everything above; 2: an index on (tenant, panel, created_at, id) over every record, for
``iter_recent``. ``schema_version(version)`` holds one row. :func:`create_schema` runs under an advisory lock
(replicas starting together apply a migration once), applies every migration above the stored
version in one transaction, and refuses (``StorageError``) a database stamped newer than this
code, leaving it untouched.
"""

from __future__ import annotations

import psycopg

from judgefuse.service.storage.errors import StorageError

__all__ = ["MIGRATIONS", "SCHEMA_LOCK", "SCHEMA_VERSION", "create_schema", "stored_version"]

SCHEMA_LOCK = 0x6A66_0001
"""Advisory lock key held while the schema is created or migrated."""

_V1 = """
CREATE TABLE IF NOT EXISTS meta (
    name text PRIMARY KEY,
    value text COLLATE "C" NOT NULL
);
CREATE TABLE IF NOT EXISTS verdict_ids (
    tenant text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    created_at float8 NOT NULL,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX IF NOT EXISTS verdict_ids_created ON verdict_ids (created_at);
CREATE TABLE IF NOT EXISTS verdicts (
    created_at float8 NOT NULL,
    tenant text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    panel text COLLATE "C" NOT NULL,
    label text COLLATE "C",
    labelled_at float8,
    body text COLLATE "C" NOT NULL,
    PRIMARY KEY (created_at, tenant, id)
) PARTITION BY RANGE (created_at);
CREATE TABLE IF NOT EXISTS verdicts_default PARTITION OF verdicts DEFAULT;
CREATE INDEX IF NOT EXISTS verdicts_panel_labelled
    ON verdicts (tenant, panel, created_at, id) WHERE label IS NOT NULL;
CREATE INDEX IF NOT EXISTS verdicts_labelled
    ON verdicts (tenant, created_at, id) WHERE label IS NOT NULL;
CREATE TABLE IF NOT EXISTS acc_total (
    tenant text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    field text COLLATE "C" NOT NULL,
    ival bigint NOT NULL DEFAULT 0,
    fval float8 NOT NULL DEFAULT 0,
    is_float boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant, key, field)
);
CREATE TABLE IF NOT EXISTS acc_hour (
    tenant text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    hour bigint NOT NULL,
    field text COLLATE "C" NOT NULL,
    ival bigint NOT NULL DEFAULT 0,
    fval float8 NOT NULL DEFAULT 0,
    is_float boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant, key, hour, field)
);
CREATE TABLE IF NOT EXISTS version_counters (
    kind text COLLATE "C" NOT NULL,
    tenant text COLLATE "C" NOT NULL,
    panel text COLLATE "C" NOT NULL,
    last integer NOT NULL,
    PRIMARY KEY (kind, tenant, panel)
);
CREATE TABLE IF NOT EXISTS thresholds (
    tenant text COLLATE "C" NOT NULL,
    panel text COLLATE "C" NOT NULL,
    version integer NOT NULL,
    created_at float8 NOT NULL,
    body text COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant, panel, version)
);
CREATE TABLE IF NOT EXISTS models (
    tenant text COLLATE "C" NOT NULL,
    panel text COLLATE "C" NOT NULL,
    version integer NOT NULL,
    created_at float8 NOT NULL,
    body text COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant, panel, version)
);
CREATE TABLE IF NOT EXISTS monitor_events (
    tenant text COLLATE "C" NOT NULL,
    panel text COLLATE "C" NOT NULL,
    version integer NOT NULL,
    created_at float8 NOT NULL,
    body text COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant, panel, version)
);
CREATE TABLE IF NOT EXISTS review_queue (
    tenant text COLLATE "C" NOT NULL,
    panel text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    stratum text COLLATE "C" NOT NULL,
    rank float8 NOT NULL,
    lease_owner text COLLATE "C",
    lease_expires_at float8,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX IF NOT EXISTS review_queue_rank ON review_queue (tenant, panel, rank, id);
CREATE INDEX IF NOT EXISTS review_queue_leases
    ON review_queue (tenant, panel, lease_expires_at) WHERE lease_expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS review_counts (
    tenant text COLLATE "C" NOT NULL,
    panel text COLLATE "C" NOT NULL,
    stratum text COLLATE "C" NOT NULL,
    routed bigint NOT NULL DEFAULT 0,
    inqueue bigint NOT NULL DEFAULT 0,
    labelled bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, panel, stratum)
);
CREATE TABLE IF NOT EXISTS leases (
    tenant text COLLATE "C" NOT NULL,
    name text COLLATE "C" NOT NULL,
    owner text COLLATE "C" NOT NULL,
    expires_at float8 NOT NULL,
    PRIMARY KEY (tenant, name)
);
CREATE TABLE IF NOT EXISTS state_blobs (
    tenant text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    version integer NOT NULL,
    body text COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant, key)
);
CREATE TABLE IF NOT EXISTS verdict_claims (
    tenant text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    owner text COLLATE "C" NOT NULL,
    expires_at float8 NOT NULL,
    PRIMARY KEY (tenant, id)
);
"""

_V2 = """
CREATE INDEX IF NOT EXISTS verdicts_panel_recent ON verdicts (tenant, panel, created_at, id);
"""
"""Version 2: ``iter_recent`` (a panel's newest records, labelled or not, for Dawid-Skene's
cold start) reads one index range, newest first."""

_V3 = """
CREATE TABLE IF NOT EXISTS label_history (
    tenant text COLLATE "C" NOT NULL,
    id text COLLATE "C" NOT NULL,
    seq integer NOT NULL,
    body text COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant, id, seq)
);
"""
"""Version 3: every label, relabel, comment change and undo of a verdict, appended in the
label's transaction, the newest ``LABEL_HISTORY_KEEP`` kept per verdict
(:mod:`judgefuse.service.storage.label_history`); a retention pass drops a deleted verdict's."""

MIGRATIONS: dict[int, str] = {1: _V1, 2: _V2, 3: _V3}
"""version -> the DDL that brings version - 1 to it (1: the whole schema from nothing)."""

SCHEMA_VERSION = max(MIGRATIONS)


async def stored_version(conn: psycopg.AsyncConnection) -> int | None:
    """The version stamped in the database, or None when it has no ``schema_version`` table."""
    cur = await conn.execute("SELECT to_regclass('schema_version') IS NOT NULL")
    exists = await cur.fetchone()
    if not exists or not exists[0]:
        return None
    cur = await conn.execute("SELECT max(version) FROM schema_version")
    row = await cur.fetchone()
    return None if row is None or row[0] is None else int(row[0])


async def create_schema(conn: psycopg.AsyncConnection, where: str) -> int:
    """Apply the migrations the database lacks, in one transaction under the schema lock;
    return the version now stamped. ``where`` (the redacted URL) names the database in the
    error for a newer schema."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        await conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)")
        current = await stored_version(conn) or 0
        if current > SCHEMA_VERSION:
            raise StorageError(
                f"postgresql: {where} has schema {current}, newer than this code "
                f"({SCHEMA_VERSION}); upgrade judgefuse before starting it on this database"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            await conn.execute(MIGRATIONS[version])
        if current < SCHEMA_VERSION:
            await conn.execute("DELETE FROM schema_version")
            await conn.execute(
                "INSERT INTO schema_version (version) VALUES (%s)", (SCHEMA_VERSION,)
            )
    return SCHEMA_VERSION
