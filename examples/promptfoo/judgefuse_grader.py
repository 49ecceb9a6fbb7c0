"""promptfoo loads this file for the ``python`` assertion (``file://judgefuse_grader.py``);
the grader itself is judgefuse.integrations.promptfoo (docs/integrations/promptfoo.md)."""

from judgefuse.integrations.promptfoo import get_assert

__all__ = ["get_assert"]
