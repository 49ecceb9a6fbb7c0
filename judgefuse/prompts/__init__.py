"""Prompt templates (SC, MP, logprob, fuser) and the readers of judge output.

This room imports nothing else of judgefuse (DESIGN.md): it returns its own small frozen
dataclasses (:class:`ParsedJudgment`, :class:`LetterProbs`), and ``judges`` turns them into votes.
"""

from judgefuse.prompts.logprobs import LetterProbs, letter_probabilities, token_letter
from judgefuse.prompts.normalise import normalise_choice, normalise_confidence
from judgefuse.prompts.parse import ParsedJudgment, parse_judgment, parse_letter
from judgefuse.prompts.render import (
    BLOCK_TAGS,
    MODES,
    PromptRenderError,
    neutralise_tags,
    render_fuser_messages,
    render_messages,
    render_template,
)

__all__ = [
    "BLOCK_TAGS",
    "MODES",
    "LetterProbs",
    "ParsedJudgment",
    "PromptRenderError",
    "letter_probabilities",
    "neutralise_tags",
    "normalise_choice",
    "normalise_confidence",
    "parse_judgment",
    "parse_letter",
    "render_fuser_messages",
    "render_messages",
    "render_template",
    "token_letter",
]
