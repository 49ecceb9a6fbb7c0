"""judgefuse: a calibrated LLM-as-a-judge gateway.

Rooms (sub-packages) import one way only, top to bottom:
``service -> evaluation -> fusion -> judges -> (prompts, calibration)``.
``calibration`` and ``prompts`` import nothing of ours; ``judges`` owns the vote
type, ``fusion`` owns the verdict type.
"""

__version__ = "0.1.0"
