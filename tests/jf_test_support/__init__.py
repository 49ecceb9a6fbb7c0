"""Test support shared across the test folders, imported as a package (``tests`` is on pytest's
``pythonpath``) instead of being loaded by file path:

* :mod:`.openai_stub`: a scripted OpenAI-compatible HTTP server on loopback;
* :mod:`.secret_forms`: the shapes a leaked key can take, for redaction tests;
* :mod:`.crash_harness`: gateway/stub/Redis subprocesses, load, audit and recount for the
  crash and replica tests.
"""
