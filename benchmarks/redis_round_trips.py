"""Redis commands per verdict, from the server's own ``INFO commandstats``.

Usage: ``python benchmarks/redis_round_trips.py [--verdicts 50]`` (needs ``redis-server`` on PATH)

Starts a throwaway redis-server (no persistence), runs the app in process (ASGI, an
``external`` 5-judge panel, ``POST /v1/fuse`` so no judge is called) and prints, per verdict,
how many times each command ran, with and without an inline label. Commands run inside a Lua
script are counted under their own names too, so ``evalsha`` is the number of script round
trips and every other command outside the scripts is a round trip of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests")]

import redis  # noqa: E402
from jf_test_support.app_support import free_port, running_app  # noqa: E402

from judgefuse.service.settings import Settings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verdicts", type=int, default=50)
    args = parser.parse_args()
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="redis-rt-"))
    server = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                               "--dir", str(workdir)], stdout=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    panel = workdir / "ext.yaml"
    panel.write_text("name: ext\nfusion: majority\nquorum: 1\njudges:\n"
                     + "".join(f"  - {{name: judge{i}, external: true}}\n" for i in range(5)))
    settings = Settings(storage_url=f"redis://127.0.0.1:{port}/0", panels=[panel], auth_disabled=True,
                        refit_every_labels=0)

    def calls() -> dict[str, int]:
        return {name.removeprefix("cmdstat_"): int(v["calls"])
                for name, v in client.info("commandstats").items()}

    async def run() -> None:
        async with running_app(settings) as (_app, http):
            body = {"question": "q", "answer_a": "a", "answer_b": "b",
                    "votes": [{"judge": f"judge{i}", "choice": "A", "confidence": 0.85} for i in range(5)]}
            for _ in range(5):  # warm-up: scripts loaded, state cached
                await http.post("/v1/fuse", json=body)
            for label in (None, "A"):
                before = calls()
                for _ in range(args.verdicts):
                    response = await http.post("/v1/fuse", json={**body, **({"label": label} if label else {})})
                    if response.status_code != 200:
                        raise SystemExit(f"HTTP {response.status_code}: {response.text}")
                after = calls()
                per = {k: (after[k] - before.get(k, 0)) / args.verdicts for k in after
                       if after[k] != before.get(k, 0) and k != "info"}
                print(f"{'with an inline label' if label else 'no label'}: per verdict "
                      + ", ".join(f"{k} {v:g}" for k, v in sorted(per.items())))

    try:
        asyncio.run(run())
    finally:
        server.terminate()


if __name__ == "__main__":
    main()
