"""What single-flight idempotency costs a request that carries an ``id`` on Redis: one claim
(``SET NX PX`` in a script) and one release (compare-and-delete) per request.

Usage: ``python benchmarks/bench_claims.py [--pairs 2000]`` (starts a throwaway redis-server
on a free loopback port; needs ``redis-server`` on PATH). SQLite's claim is a no-op.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import subprocess
import time

from judgefuse.service.storage.redis import RedisStorage


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def main(pairs: int) -> None:
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server not found")
    port = _free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no"], stdout=subprocess.DEVNULL)
    try:
        storage = RedisStorage(f"redis://127.0.0.1:{port}/0")
        for _ in range(100):
            try:
                await storage.open()
                await storage.client.ping()
                break
            except Exception:
                await storage.close()
                await asyncio.sleep(0.05)
        times = []
        for i in range(pairs):
            started = time.perf_counter()
            assert await storage.claim_verdict_id("t", f"id{i}", "replica", 10.0)
            await storage.release_verdict_id("t", f"id{i}", "replica")
            times.append(time.perf_counter() - started)
        await storage.close()
        times.sort()
        print(f"claim + release per request with an id ({pairs} pairs, loopback Redis): "
              f"p50 {statistics.median(times) * 1e3:.3f} ms, "
              f"p99 {times[int(0.99 * len(times))] * 1e3:.3f} ms")
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2000)
    asyncio.run(main(parser.parse_args().pairs))
