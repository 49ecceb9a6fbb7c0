"""Which optional install (``pip install 'judgefuse[EXTRA]'``) provides a missing module.

``pip install judgefuse`` is the client and the offline engine (``eval``, ``compare``, ``tune``,
``winrate``); judging, serving, PostgreSQL, Parquet, local models, Ray and the integrations are
extras (pyproject.toml's ``[project.optional-dependencies]``). A command that needs one it does
not have must say which, not die with a ``ModuleNotFoundError`` traceback: the command line
turns :func:`missing_extra` of such an error into a :class:`MissingExtra` (exit status 2).

``tests/test_installs.py`` keeps :data:`EXTRA_OF_MODULE` honest against the extras' own
requirements and installs each documented combination into a fresh environment.
"""

from __future__ import annotations

from judgefuse.errors import InputError

__all__ = ["EXTRA_OF_MODULE", "MissingExtra", "missing_extra"]

EXTRA_OF_MODULE: dict[str, str] = {
    # judges: calling judge models
    "litellm": "judges",
    "openai": "judges",
    "aiohttp": "judges",
    "httptools": "judges",
    "tenacity": "judges",
    # service: the gateway
    "fastapi": "service",
    "uvicorn": "service",
    "redis": "service",
    "prometheus_client": "service",
    "fastapi_offline": "service",
    "markdown_it": "service",
    "nh3": "service",
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
    "xllamacpp": "local",
    "pyarrow": "parquet",
    "opentelemetry": "otel",
    "inspect_ai": "inspect",
    "deepeval": "deepeval",
    "ray": "ray",
}
"""Top-level import name -> the extra that installs it."""


class MissingExtra(InputError):
    """A command needs an optional install that is not there: the message names the extra and
    the command that installs it."""

    def __init__(self, extra: str, module: str) -> None:
        self.extra = extra
        self.module = module
        super().__init__(
            f"this needs the '{extra}' extra (module {module!r} is not installed): "
            f"pip install 'judgefuse[{extra}]'"
        )


def missing_extra(exc: ModuleNotFoundError) -> MissingExtra | None:
    """The :class:`MissingExtra` behind ``exc``, or None when the missing module is not one an
    extra provides (then it is a broken install or a bug, and its traceback is the message)."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRA_OF_MODULE.get(top)
    return None if extra is None else MissingExtra(extra, top)
