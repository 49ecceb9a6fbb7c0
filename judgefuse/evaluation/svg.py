"""Reliability diagrams as inline SVG: no plotting library, no external files.

A diagram has confidence on x and accuracy on y, both with ticks at 0, 0.2, ..., 1; one bar per
non-empty bin (its top at the bin's accuracy, its width the bin's); the diagonal of perfect
calibration; and each bin's gap between accuracy and mean confidence drawn as a band, red where
the judge is overconfident (confidence above accuracy) and green where it is underconfident. The
TH-Score regions ("Overconfidence in LLM-as-a-Judge", Figure 3: high confidence >= 1 - eps, low confidence <= eps) are
shaded behind. Under the x axis a strip shows how many items fall in each bin, with the count.
The panel's title (name, ECE, n) is HTML around the SVG, so it wraps; with ``fluid`` the SVG
scales to its box (the report), else it keeps its natural size (the service dashboard).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from judgefuse.calibration import ReliabilityBin

SIZE = 200
LEFT, TOP, RIGHT = 34, 8, 8
STRIP = 26  # the count histogram under the axis: bars, then the counts
BOTTOM = 30 + STRIP
WIDTH = LEFT + SIZE + RIGHT
HEIGHT = TOP + SIZE + BOTTOM
TICKS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
OVER, UNDER = "#d9412b", "#2e9b4f"


def _x(value: float) -> float:
    return LEFT + value * SIZE


def _y(value: float) -> float:
    return TOP + (1.0 - value) * SIZE


def _axes() -> list[str]:
    parts = [f'<rect x="{LEFT}" y="{TOP}" width="{SIZE}" height="{SIZE}" fill="none" stroke="#888"/>']
    for tick in TICKS:
        x, y = _x(tick), _y(tick)
        label = f"{tick:g}"
        parts.append(f'<line x1="{x:.1f}" y1="{_y(0)}" x2="{x:.1f}" y2="{_y(0) + 4}" stroke="#666"/>')
        parts.append(f'<text x="{x:.1f}" y="{_y(0) + 13}" font-size="9" text-anchor="middle">{label}</text>')
        parts.append(f'<line x1="{LEFT - 4}" y1="{y:.1f}" x2="{LEFT}" y2="{y:.1f}" stroke="#666"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 3:.1f}" font-size="9" text-anchor="end">{label}</text>')
        if 0.0 < tick < 1.0:
            parts.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{_y(0)}" stroke="#eee"/>')
            parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{_x(1)}" y2="{y:.1f}" stroke="#eee"/>')
    parts.append(
        f'<text x="{_x(0.5)}" y="{HEIGHT - 2}" font-size="10" text-anchor="middle">confidence</text>'
    )
    parts.append(
        f'<text x="9" y="{_y(0.5)}" font-size="10" text-anchor="middle" transform="rotate(-90 9 {_y(0.5)})">accuracy</text>'
    )
    return parts


def _regions(eps: float) -> list[str]:
    """TH-Score's high (>= 1 - eps) and low (<= eps) confidence regions, shaded behind the bars."""
    if not 0.0 < eps < 0.5:
        return []
    return [
        f'<rect class="region-high" x="{_x(1 - eps):.1f}" y="{TOP}" width="{eps * SIZE:.1f}" height="{SIZE}"'
        f' fill="{OVER}" fill-opacity="0.10"><title>high-confidence region (c &gt;= {1 - eps:g})</title></rect>',
        f'<rect class="region-low" x="{_x(0):.1f}" y="{TOP}" width="{eps * SIZE:.1f}" height="{SIZE}"'
        f' fill="{UNDER}" fill-opacity="0.10"><title>low-confidence region (c &lt;= {eps:g})</title></rect>',
    ]


def reliability_svg(bins: Sequence[ReliabilityBin], *, title: str, eps: float = 0.1, fluid: bool = False) -> str:
    """SVG markup of one reliability diagram (all text escaped); ``title`` is the hover text.

    ``fluid`` makes the diagram fill its box's width (the report's grid); otherwise it has its
    fixed natural size (``WIDTH`` x ``HEIGHT`` px), for pages that lay it out as a fixed tile.
    """
    total = sum(b.count for b in bins) or 1
    biggest = max((b.count for b in bins), default=0) or 1
    size = 'width="100%"' if fluid else f'width="{WIDTH}" height="{HEIGHT}"'
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" {size}'
        f' role="img" aria-label="reliability diagram: {escape(title)}"><title>{escape(title)}</title>',
        f'<rect x="{LEFT}" y="{TOP}" width="{SIZE}" height="{SIZE}" fill="#fcfcfc"/>',
        *_regions(eps),
        *_axes(),
    ]
    strip_top = _y(0) + 18
    for b in bins:
        if b.count == 0 or b.accuracy is None or math.isnan(b.accuracy):
            continue
        left, right = _x(b.lower), _x(b.upper)
        top = _y(b.accuracy)
        opacity = 0.35 + 0.65 * b.count / total
        parts.append(
            f'<rect class="bin" x="{left:.1f}" y="{top:.1f}" width="{right - left:.1f}"'
            f' height="{_y(0) - top:.1f}" fill="#3b6fb6" fill-opacity="{opacity:.2f}" stroke="#24497a">'
            f"<title>[{b.lower:.2f}, {b.upper:.2f}]: n={b.count}, acc={b.accuracy:.3f},"
            f" conf={b.mean_confidence:.3f}</title></rect>"
        )
        over = b.mean_confidence > b.accuracy
        gap_top, gap_bottom = sorted((_y(b.mean_confidence), top))
        parts.append(
            f'<rect class="{"gap-over" if over else "gap-under"}" x="{left + 1:.1f}" y="{gap_top:.1f}"'
            f' width="{right - left - 2:.1f}" height="{max(gap_bottom - gap_top, 0.5):.1f}"'
            f' fill="{OVER if over else UNDER}" fill-opacity="0.55">'
            f"<title>gap {b.mean_confidence - b.accuracy:+.3f} ({'over' if over else 'under'}confident)</title></rect>"
        )
        height = (STRIP - 10) * b.count / biggest
        parts.append(
            f'<rect class="count" x="{left + 1:.1f}" y="{strip_top + STRIP - 10 - height:.1f}" width="{right - left - 2:.1f}"'
            f' height="{height:.1f}" fill="#999"><title>{b.count} items</title></rect>'
        )
        parts.append(
            f'<text class="count-label" x="{(left + right) / 2:.1f}" y="{strip_top + STRIP - 2:.1f}" font-size="7"'
            f' text-anchor="middle" fill="#555">{b.count}</text>'
        )
    parts.append(f'<line x1="{_x(0)}" y1="{_y(0)}" x2="{_x(1)}" y2="{_y(1)}" stroke="#555" stroke-dasharray="4 3"/>')
    parts.append("</svg>")
    return "".join(parts)
