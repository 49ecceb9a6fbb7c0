"""``pip install judgefuse`` (no ``service`` extra) gives a working client: a fresh interpreter
in which fastapi, starlette, uvicorn, redis, litellm and aiohttp cannot be imported judges, fuses
and labels through a live gateway."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from jf_test_support.live_gateway import API_KEY, live_gateway

BLOCKED = ("fastapi", "starlette", "uvicorn", "redis", "litellm", "aiohttp", "prometheus_client", "psycopg")

SCRIPT = textwrap.dedent("""
    import sys

    class Blocked:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is not installed (blocked by the test)")
            return None

    sys.meta_path.insert(0, Blocked())
    from judgefuse.client import Client

    with Client(URL, KEY) as client:
        verdict = client.judge(question="What is 2 + 2?", answer_a="4", answer_b="5")
        fused = client.fuse(question="q", answer_a="a", answer_b="b", panel="ext",
                            votes=[{"judge": "e1", "choice": "B", "confidence": 0.8},
                                   {"judge": "e2", "choice": "B", "confidence": 0.6}])
        label = client.feedback(verdict.id, "A")
    print(verdict.choice, fused.choice, label.status)
    print(sorted({m.split(".")[0] for m in sys.modules} & set(BLOCKED)))
""")


def test_the_client_works_without_the_server_dependencies(tmp_path: Path) -> None:
    with live_gateway(tmp_path) as live:
        code = f"BLOCKED = {BLOCKED!r}\nURL = {live.url!r}\nKEY = {API_KEY!r}\n" + SCRIPT
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["A B labelled", "[]"]
