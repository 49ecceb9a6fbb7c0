"""The root of judgefuse's own exceptions, and the branch that means "the input was wrong".

Callers need to tell two kinds of failure apart without knowing every room's error types: a
user who gave a bad file, flag value, method name or config (:class:`InputError`: say what was
wrong, exit status 2, no traceback) and a bug in judgefuse or a plugin (anything else: it
propagates with its traceback, so it is never mistaken for a user's mistake). Each room's typed
input errors subclass :class:`InputError` and keep their historic base class too
(``ValueError``, ``KeyError``, ...), so ``except ValueError`` callers keep working.

This module imports nothing, so every room, ``calibration/`` and ``prompts/`` included, may
use it; it is the bottom layer of the import contract, below ``json_input`` and the other
stdlib-only helpers.

The tree (``tests/test_errors_tree.py`` walks the package for exception classes outside it)::

    JudgefuseError
    +-- InputError                        each room's typed input errors (also ValueError, KeyError, ...)
    +-- judgefuse.service.errors.ServiceError       an HTTP answer: its ``status`` and body
    |   +-- FieldProblem, InvalidFields (422), TooLarge (413), NotFound (404), Conflict (409)
    |   +-- Forbidden (403) -- web.sessions.CrossSite, PageRefused; Unauthorized (401) -- web.sessions.SignInRequired
    |   +-- Overloaded (503/429), QuorumLost (503)
    |   +-- kernel.shared_state.StateContention (503), review.queue.LeaseCapReached
    +-- judgefuse.service.storage.StorageError      every backend's failures, mapped at its boundary
    |   +-- StorageUnavailable (503), VerdictNotFound (404), VerdictExists, AccumulatorOverflow,
    |   |   StorageCorrupt
    |   +-- (postgres) _Retry                       a transaction to run again, never seen outside
    +-- service.judging.single_flight.DifferentItemInFlight
    +-- service.learning.refit_worker.RefitWorkerFailed   (also RuntimeError)
    +-- service.learning.signal_caps.TooManyFeatures      (also ValueError)
    +-- service.web.middleware.BodyTimeout, _BodyTooLarge (also Starlette's HTTPException: 408, 413)
    +-- judgefuse.judges.transport.errors.TransportError   a judge call failed (becomes an invalid vote)
    |   +-- RetryableError: RateLimited, ServerError, JudgeTimeout, ConnectionFailed
    |   +-- FatalError: AuthenticationFailed, BadRequest -- Unsupported, MalformedResponse
    |   +-- judges.batch.answers.AwaitingBatch
    +-- judges.transport.http1.ConnectError, ConnectionBroken, ProtocolError   (also OSError)
    +-- judges.local.server.LocalServerError (also RuntimeError)
    +-- judges.local.models.ModelVerificationError, prompts.render.PromptRenderError (also ValueError)
    +-- evaluation.judge_ray.RayExecutorError (also OSError: a cluster that cannot finish a run, exit 1)
    +-- json_input.JSONTextError (also ValueError: text that is not one JSON document judgefuse reads)
    +-- judgefuse.client.errors.JudgefuseError      anything the client raises (its own tree there)
    +-- client.retry.BreakerOpen                    internal to the client: a run whose breaker opened
"""

from __future__ import annotations

__all__ = ["InputError", "JudgefuseError"]


class JudgefuseError(Exception):
    """Raised on purpose by judgefuse: catch it to catch everything judgefuse means to say."""


class InputError(JudgefuseError):
    """The user's input cannot be used (a bad file, flag value, unknown name or config).

    The message is written for the user and names what was wrong; the command line prints it
    as ``judgefuse COMMAND: error: ...`` and exits 2.
    """
