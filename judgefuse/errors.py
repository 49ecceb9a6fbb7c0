"""The root of judgefuse's own exceptions, and the branch that means "the input was wrong".

Callers need to tell two kinds of failure apart without knowing every room's error types: a
user who gave a bad file, flag value, method name or config (:class:`InputError`: say what was
wrong, exit status 2, no traceback) and a bug in judgefuse or a plugin (anything else: it
propagates with its traceback, so it is never mistaken for a user's mistake). Each room's typed
input errors subclass :class:`InputError` and keep their historic base class too
(``ValueError``, ``KeyError``, ...), so ``except ValueError`` callers keep working.

This module imports nothing, so every room, ``calibration/`` and ``prompts/`` included, may
use it.
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
