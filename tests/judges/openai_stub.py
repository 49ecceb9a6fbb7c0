"""Moved to ``tests/jf_test_support/openai_stub.py`` (import ``jf_test_support.openai_stub``).

Kept so a test written before the move that still loads this path keeps working: it re-exports
the package module's names, so its classes are the very same objects.
"""

import jf_test_support.openai_stub as _moved

globals().update({k: v for k, v in vars(_moved).items() if not k.startswith("__")})
