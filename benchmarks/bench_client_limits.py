"""The two limits of issue 47 the client lacked: a deadline over the whole answer, and a cap
on the answer's size. Before: with ``RetryPolicy(deadline_s=3)`` an answer trickled in one
byte every 0.1 s took 20.1 s; a 200 MB answer cost 658 MB at peak.

Usage: ``python benchmarks/bench_client_limits.py [--out benchmarks/results/client_limits.txt]``

A stdlib HTTP server on loopback (a thread of this process) answers ``/trickle/...`` with a
200-byte body one byte every 0.1 s (20 s in all) and ``/big/...`` with 200 MB of JSON-ish bytes
without a Content-Length. Printed: the wall time of ``Client.verdict`` and
``AsyncClient.verdict`` against the trickle with a 3 s deadline and the error raised; the
error and this process's peak resident memory (VmHWM, ru_maxrss) before and after reading the
200 MB answer with the default cap (64 MB).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from judgefuse.client import AsyncClient, Client, JudgefuseError, RetryPolicy

BIG = 200 * 1024 * 1024


class Slow(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        with contextlib.suppress(OSError):
            if self.path.startswith("/trickle"):
                self.send_response(200)
                self.send_header("Content-Length", "200")
                self.end_headers()
                for _ in range(200):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.1)
            else:
                self.send_response(200)
                self.send_header("Connection", "close")
                self.end_headers()
                chunk = b"[" * 65536
                for _ in range(BIG // len(chunk)):
                    self.wfile.write(chunk)


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    policy = RetryPolicy(deadline_s=3)
    try:
        with Client(f"{url}/trickle", retry=policy) as client:  # the call is timed, not the set-up
            started = time.monotonic()
            client.verdict("v1")
    except JudgefuseError as exc:
        say(f"trickled answer, deadline_s=3, Client: {time.monotonic() - started:.2f} s, "
            f"{type(exc).__name__}: {exc}")

    async def trickle_async() -> None:
        nonlocal started
        async with AsyncClient(f"{url}/trickle", retry=policy) as client:
            started = time.monotonic()
            await client.verdict("v1")

    try:
        asyncio.run(trickle_async())
    except JudgefuseError as exc:
        say(f"trickled answer, deadline_s=3, AsyncClient: {time.monotonic() - started:.2f} s, "
            f"{type(exc).__name__}")

    before = peak_mb()
    started = time.monotonic()
    try:
        with Client(f"{url}/big") as client:  # the default max_response_bytes
            client.verdict("v1")
    except JudgefuseError as exc:
        say(f"200 MB answer, Client defaults: {type(exc).__name__} after {time.monotonic() - started:.2f} s; "
            f"peak RSS {before:.0f} MB before, {peak_mb():.0f} MB after ({exc})")
    httpd.shutdown()
    httpd.server_close()
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
