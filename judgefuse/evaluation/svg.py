"""Reliability diagrams as inline SVG: no plotting library, no external files.

A diagram has confidence on x and accuracy on y, one bar per non-empty bin (its top at the
bin's accuracy, its width the bin's), a diagonal for perfect calibration, and a red gap
marker from the bar's top to the bin's mean confidence. Bar opacity grows with the bin's
share of items so that a bin of three items does not look as solid as one of three hundred.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from judgefuse.calibration import ReliabilityBin

SIZE = 200
PAD = 28


def _x(value: float) -> float:
    return PAD + value * SIZE


def _y(value: float) -> float:
    return PAD + (1.0 - value) * SIZE


def reliability_svg(bins: Sequence[ReliabilityBin], *, title: str) -> str:
    """SVG markup of one reliability diagram (all text escaped)."""
    total = sum(b.count for b in bins) or 1
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{SIZE + 2 * PAD}" height="{SIZE + 2 * PAD}"'
        f' role="img" aria-label="reliability diagram: {escape(title)}">',
        f'<rect x="{PAD}" y="{PAD}" width="{SIZE}" height="{SIZE}" fill="#fafafa" stroke="#888"/>',
        f'<line x1="{_x(0)}" y1="{_y(0)}" x2="{_x(1)}" y2="{_y(1)}" stroke="#999" stroke-dasharray="4 3"/>',
    ]
    for b in bins:
        if b.count == 0 or b.accuracy is None or math.isnan(b.accuracy):
            continue
        left, right = _x(b.lower), _x(b.upper)
        top = _y(b.accuracy)
        opacity = 0.25 + 0.75 * b.count / total
        parts.append(
            f'<rect class="bin" x="{left:.1f}" y="{top:.1f}" width="{right - left:.1f}"'
            f' height="{_y(0) - top:.1f}" fill="#3b6fb6" fill-opacity="{opacity:.2f}" stroke="#24497a">'
            f"<title>[{b.lower:.2f}, {b.upper:.2f}]: n={b.count}, acc={b.accuracy:.3f},"
            f" conf={b.mean_confidence:.3f}</title></rect>"
        )
        centre = (left + right) / 2
        parts.append(
            f'<line x1="{centre:.1f}" y1="{top:.1f}" x2="{centre:.1f}" y2="{_y(b.mean_confidence):.1f}"'
            ' stroke="#c0392b" stroke-width="2"/>'
        )
    parts.append(f'<text x="{PAD}" y="{PAD - 8}" font-size="11">{escape(title)}</text>')
    parts.append(f'<text x="{_x(0.5)}" y="{_y(0) + 20}" font-size="10" text-anchor="middle">confidence</text>')
    parts.append(
        f'<text x="10" y="{_y(0.5)}" font-size="10" text-anchor="middle"'
        f' transform="rotate(-90 10 {_y(0.5)})">accuracy</text>'
    )
    parts.append("</svg>")
    return "".join(parts)
