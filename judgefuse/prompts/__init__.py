"""Prompt templates (SC, MP, logprob, fuser) and the readers of judge output.

This room imports nothing else of judgefuse (docs/design.md, 'Architecture'): it returns its own small frozen
dataclasses (:class:`ParsedJudgment`, :class:`LetterProbs`), and ``judges`` turns them into votes.
"""

from judgefuse.prompts.defuse import DEFUSED_OPENER, skeleton
from judgefuse.prompts.logprobs import LetterProbs, letter_probabilities, token_letter
from judgefuse.prompts.normalise import normalise_choice, normalise_confidence
from judgefuse.prompts.parse import ParsedJudgment, parse_judgment, parse_letter
from judgefuse.prompts.render import (
    BLOCK_TAGS,
    MODES,
    NONCE_HEX,
    PromptRenderError,
    block_tags,
    neutralise_tags,
    render_fuser_messages,
    render_messages,
    render_template,
    set_nonce_key,
)

__all__ = [
    "BLOCK_TAGS",
    "DEFUSED_OPENER",
    "NONCE_HEX",
    "MODES",
    "LetterProbs",
    "ParsedJudgment",
    "PromptRenderError",
    "block_tags",
    "letter_probabilities",
    "neutralise_tags",
    "normalise_choice",
    "normalise_confidence",
    "parse_judgment",
    "parse_letter",
    "render_fuser_messages",
    "render_messages",
    "render_template",
    "set_nonce_key",
    "skeleton",
    "token_letter",
]
