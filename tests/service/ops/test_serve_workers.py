"""``judgefuse serve --workers 2`` as a real process: two workers answer on one port, a verdict
stored through one is read through the other (the shared SQLite store, WAL), and SIGTERM to the
parent stops both."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import time
from pathlib import Path

import aiohttp
from jf_test_support.crash_harness import Child, child_env, wait_ready
from jf_test_support.panel_support import UNANIMOUS, external_panel

PAIR = {"question": "What is 2+2?", "answer_a": "4", "answer_b": "5", "panel": "ext"}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped) is gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def test_two_workers_share_the_port_and_the_store_and_stop_together(tmp_path: Path):
    panel = external_panel(tmp_path)
    argv = [sys.executable, "-m", "judgefuse.cli", "serve", "--host", "127.0.0.1", "--port", "0",
            "--storage", f"sqlite:///{tmp_path / 'shared.sqlite3'}", "--panel", str(panel), "--workers", "2"]
    child = Child(argv, tmp_path / "serve.log", env=child_env(JUDGEFUSE_SERVER__LOG_LEVEL="info"), cwd=tmp_path)
    try:
        found = await child.wait_for(r"serving on 127\.0\.0\.1:(\d+) with 2 workers \(pids (\d+), (\d+)\)", 60)
        url = f"http://127.0.0.1:{found.group(1)}"
        pids = {int(found.group(2)), int(found.group(3))}
        await wait_ready(url, child, 60)
        for _ in range(100):  # both workers up (each opens the store and starts its panels)
            if len(re.findall(r"Application startup complete", child.text())) == 2:
                break
            await asyncio.sleep(0.1)

        fresh = aiohttp.TCPConnector(force_close=True)  # a new connection (and worker) per request
        async with aiohttp.ClientSession(connector=fresh) as session:
            ids = []
            for _ in range(21):  # odd: the two workers' counts can never be equal (20 could split 10/10)
                async with session.post(url + "/v1/fuse", json={**PAIR, "votes": UNANIMOUS}) as r:
                    assert r.status == 200, await r.text()
                    ids.append((await r.json())["id"])
            for vid in ids:  # each read may land on either worker: the store is shared
                async with session.get(f"{url}/v1/verdicts/{vid}") as r:
                    assert r.status == 200, (vid, await r.text())
            counts = set()
            # per-process counters: two workers show two different counts. Which worker takes a
            # new connection is the kernel's choice, and on a busy machine one may take many in
            # a row: read until both have answered (bounded), not a fixed number of times
            for _ in range(400):
                async with session.get(url + "/metrics") as r:
                    text = await r.text()
                counts.add(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                               if line.startswith("judgefuse_verdicts_total{")))
                if len(counts) == 2:
                    break
            assert len(counts) == 2 and sum(counts) == 21, counts

        assert all(alive(pid) for pid in pids)
        os.kill(child.pid, signal.SIGTERM)
        # a stop that hangs never ends; on a busy machine the workers' interpreters take a while
        # to wind down after 'Finished server process' (20 s was passed once in a loaded run)
        deadline = time.monotonic() + 90
        while child.alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert not child.alive(), child.tail()
        assert child.proc.returncode == 0, child.tail()
        assert not any(alive(pid) for pid in pids)
    finally:
        with contextlib.suppress(ProcessLookupError):  # the parent's session: its workers too
            os.killpg(child.pid, signal.SIGKILL)
        child.kill()
