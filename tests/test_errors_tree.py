"""Every exception class judgefuse defines derives from ``judgefuse.errors.JudgefuseError`` (the
tree is drawn in that module's docstring), so ``except JudgefuseError`` catches everything
judgefuse raises on purpose. The test imports every module of the package and walks it for
exception classes: none is outside the tree."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import judgefuse
from judgefuse.errors import InputError, JudgefuseError


def exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module of ``judgefuse`` (the integrations, which
    import their frameworks, are left out when the framework is not installed)."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(judgefuse.__path__, "judgefuse."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:
            if info.name.startswith("judgefuse.integrations."):
                continue
            raise
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__:
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def test_every_exception_is_a_judgefuse_error() -> None:
    classes = exception_classes()
    assert len(classes) > 50, sorted(classes)  # the walk did find the package's exceptions
    outside = {name for name, cls in classes.items() if not issubclass(cls, JudgefuseError)}
    assert not outside, "exception classes outside JudgefuseError:\n" + "\n".join(sorted(outside))


def test_the_service_and_storage_errors_keep_their_http_mapping_bases() -> None:
    """Joining the tree adds a base; it takes none away (the HTTP handlers and ``except``
    clauses match on these)."""
    from starlette.exceptions import HTTPException

    from judgefuse.service.errors import ServiceError
    from judgefuse.service.learning.refit_worker import RefitWorkerFailed
    from judgefuse.service.storage import StorageError, StorageUnavailable, VerdictNotFound
    from judgefuse.service.web.middleware import BodyTimeout

    assert issubclass(VerdictNotFound, StorageError) and issubclass(StorageUnavailable, StorageError)
    assert issubclass(RefitWorkerFailed, RuntimeError)
    assert BodyTimeout.__mro__.index(HTTPException) < BodyTimeout.__mro__.index(JudgefuseError)
    assert not issubclass(ServiceError, StorageError) and not issubclass(StorageError, ServiceError)
    # the client's root is a branch: the client's own ``except`` clauses still see only its errors
    from judgefuse.client import errors as client_errors
    from judgefuse.client.retry import BreakerOpen
    from judgefuse.json_input import JSONTextError

    assert issubclass(JSONTextError, ValueError)
    assert not issubclass(BreakerOpen, client_errors.JudgefuseError)
    assert not issubclass(client_errors.JudgefuseError, InputError)
