"""Panels and votes the service tests share (no tests here), so a test module never imports
another test module: the external-judge panel and posted votes of the review-loop tests, and the
cascade panel of the cascade tests.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from jf_test_support import app_support as S
from judgefuse.service.storage import ThresholdRecord

PAIR = {"question": "Which is right?", "answer_a": "this one", "answer_b": "that one"}
EXT = ("e1", "e2", "e3")
H = S.auth("tenant-a")


def external_panel(tmp_path: Path, *, audit_rate: float = 0.05, name: str = "ext",
                   shows_verdict: bool = False) -> Path:
    judges = "".join(f"  - {{name: {j}, external: true}}\n" for j in EXT)
    text = textwrap.dedent(f"""\
        name: {name}
        fusion: majority
        quorum: 2
        audit_rate: {audit_rate}
        review_shows_verdict: {str(shows_verdict).lower()}
        judges:
        """) + judges
    path = tmp_path / f"panel-{name}-{audit_rate}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def votes(*choices: str | None, confidence: float = 0.9) -> list[dict]:
    return [{"judge": j, "choice": c, "confidence": None if c is None else confidence}
            for j, c in zip(EXT, choices, strict=False)]


UNANIMOUS = votes("A", "A", "A")  # majority confidence 1.0: auto-accepted at threshold 0.9
SPLIT = votes("A", "A", "B")  # 2/3: below 0.9, human review


async def put_threshold(storage, value: float = 0.9, panel: str = "ext") -> None:
    await storage.put_threshold("tenant-a", panel, ThresholdRecord(
        panel=panel, threshold=value, created_at=1.0, method="majority", target_precision=0.9,
        delta=0.1, coverage=0.5, n_labels=100))


def cascade_yaml(tmp_path: Path, url: str, *, fallback: str = "review", panel_threshold: float = 0.0,
                 thresholds: tuple[float | None, ...] = (0.9, 0.9, 0.9), stage_method: str = "majority",
                 timeouts: dict[str, float] | None = None, deadline_s: float = 10, quorum: int = 1,
                 name: str = "casc") -> Path:
    """Judges j1, j2, j3 at the stub; one stage per judge, cheapest first."""
    timeouts = timeouts or {}
    entries = "".join(textwrap.dedent(f"""\
          - name: {j}
            model: openai/{j}
            backend: direct
            api_base: {url}
            api_key_env: {S.PLANTED_ENV}
            mode: sc
            timeout_s: {timeouts.get(j, 3.0)}
            retries: {{attempts: 1, base_delay_s: 0, max_delay_s: 0}}
        """) for j in S.JUDGES)
    stages = "".join(
        f"  - {{judges: [{j}], threshold: {'null' if t is None else t}, method: {stage_method}}}\n"
        for j, t in zip(S.JUDGES, thresholds, strict=True)
    )
    text = (f"name: {name}\nfusion: majority\nquorum: {quorum}\ndeadline_s: {deadline_s}\n"
            f"judges:\n{textwrap.indent(entries, '  ')}cascade:\n{stages}"
            f"cascade_fallback: {fallback}\ncascade_panel_threshold: {panel_threshold}\n")
    path = tmp_path / f"panel-{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path
