"""Run the app with the example plugin's backend, fusion method and storage; print what it said.

Run as a subprocess by test_example_plugin.py with the plugin installed (``PYTHONPATH``), never
imported by the test session. Usage: ``python service_with_plugin.py WORKDIR``. Judges through
``jfx-canned`` (no network), fuses with ``jfx_median_p``, stores in ``jfxsqlite://WORKDIR/db``,
labels four verdicts (two A, two B) and prints ``{"verdicts": [...], "calibration": {...}}``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path

from jf_test_support import app_support as S

PANEL = textwrap.dedent("""\
    name: main
    fusion: jfx_median_p
    quorum: 2
    judges:
      - {name: sure1, model: canned/95, backend: jfx-canned, mode: sc}
      - {name: sure2, model: canned/95, backend: jfx-canned, mode: sc}
      - {name: unsure, model: canned/60, backend: jfx-canned, mode: sc}
""")


async def main(workdir: Path) -> None:
    panel = workdir / "panel.yaml"
    panel.write_text(PANEL, encoding="utf-8")
    settings = S.make_settings(workdir, [panel], storage_url=f"jfxsqlite://{workdir / 'db'}")
    headers = S.auth("tenant-a")
    verdicts = []
    async with S.running_app(settings, environ={}) as (_app, client):
        for i, label in enumerate("AABB"):
            pair = {"id": f"p{i}", "question": f"q{i}", "answer_a": "a", "answer_b": "b", "label": label}
            response = await client.post("/v1/judge", json=pair, headers=headers)
            response.raise_for_status()
            verdicts.append(response.json())
        calibration = (await client.get("/v1/calibration", params={"panel": "main"}, headers=headers)).json()
    print(json.dumps({"verdicts": verdicts, "calibration": calibration}))


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
