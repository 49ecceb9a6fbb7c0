"""CPU per judge call, two source trees interleaved in the same minutes: ``Panel.judge`` against
the bare aiohttp fan-out, in process, without the web layer.

Usage: ``python benchmarks/bench_judge_call_ab.py --old /tmp/old-tree [--new .] [--pairs 4]
[--seconds 4] [--judges 5] [--latency-ms 5] [--concurrency 32]``
(``--old``: e.g. ``git archive <commit> | tar -x -C /tmp/old-tree``).

``bench_gateway_ab.py`` measures a whole ``/v1/judge`` request, where a judge call is a few
tenths of the CPU and the web layer, the store and the monitors move with the machine's load.
This measures the judge call alone: for each tree (old, new, old, new, ... ``--pairs`` times),
a child process with that tree first on ``sys.path`` builds a panel of ``--judges`` SC judges
on the direct aiohttp path (the judges of ``bench_gateway.py``: retries off, one shared stub),
drives ``Panel.judge`` in a closed loop of ``--concurrency`` requests for ``--seconds``, then
the bare fan-out (one ``session.post`` + ``json.loads`` per judge, as ``bench_gateway.py``'s
bare server does) the same way, and prints the process's CPU ms per judge call for each
(``time.process_time``). The child runs on core 1, the stub on core 0 (``sched_setaffinity``).
The difference, judgefuse minus bare, is what the judge layers add to a call: the prompt, the
request, the retry/limit/circuit/timeout layers, the reply's parsing, the vote.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHILD = "--child"


def child(tree: str, stub_url: str, args: argparse.Namespace) -> None:
    """Runs in the child: judgefuse's calls, then the bare ones; prints one JSON line."""
    sys.path[:0] = [tree, str(Path(tree) / "benchmarks")]
    import aiohttp
    import bench_gateway as bg
    import uvloop

    from judgefuse.judges.config import PanelConfig
    from judgefuse.judges.panel import Panel
    from judgefuse.judges.types import PairwiseItem

    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})

    async def run() -> dict[str, float]:
        judges = [dict(name=f"judge{i}", model=f"openai/judge{i}", backend="direct", api_base=stub_url,
                       mode="sc", timeout_s=10, max_concurrency=1024,
                       retries=dict(attempts=1, base_delay_s=0, max_delay_s=0))
                  for i in range(args.judges)]
        panel = Panel.from_config(PanelConfig.model_validate(
            dict(name="bench", fusion="majority", quorum=1, deadline_s=20, judges=judges)))
        await panel.start()
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        bodies = [json.dumps({"model": f"judge{i}", "temperature": 0.0,
                              "messages": [{"role": "user", "content": json.dumps(bg.PAIR)}]}).encode()
                  for i in range(args.judges)]
        count = 0

        async def judgefuse() -> None:
            nonlocal count
            count += 1
            votes = await panel.judge(PairwiseItem(id=f"i{count}", **bg.PAIR))
            if not all(vote.valid for vote in votes):
                raise SystemExit(f"an invalid vote: {votes}")

        async def call(body: bytes) -> object:
            async with session.post(stub_url + "/chat/completions", data=body,
                                    headers={"Content-Type": "application/json"}) as response:
                return json.loads(await response.read())

        async def bare() -> None:
            await asyncio.gather(*(call(body) for body in bodies))

        async def closed_loop(one, seconds: float) -> float:  # type: ignore[no-untyped-def]
            stop, done = time.monotonic() + seconds, 0

            async def worker() -> None:
                nonlocal done
                while time.monotonic() < stop:
                    await one()
                    done += 1

            cpu = time.process_time()
            await asyncio.gather(*(worker() for _ in range(args.concurrency)))
            return (time.process_time() - cpu) / max(done * args.judges, 1) * 1e3

        await closed_loop(judgefuse, 1.0)  # warm-up: imports, connections, the price table
        await closed_loop(bare, 1.0)
        out = {"judgefuse": await closed_loop(judgefuse, args.seconds),
               "bare": await closed_loop(bare, args.seconds)}
        await panel.aclose()
        await session.close()
        return out

    uvloop.install()
    print(json.dumps(asyncio.run(run())), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="the baseline source tree")
    parser.add_argument("--new", default=str(REPO), help="the changed source tree (default: this one)")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--judges", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=5.0, help="the stub's delay per call")
    parser.add_argument("--concurrency", type=int, default=32)
    if len(sys.argv) > 3 and sys.argv[1] == CHILD:
        child(sys.argv[2], sys.argv[3], parser.parse_args(["--old", sys.argv[2], *sys.argv[4:]]))
        return
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_gateway as bg

    stub, line = bg.spawn("--serve-stub", str(bg.free_port()), str(args.latency_ms))
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(stub.pid, {0})
    stub_url = line.split(" ", 1)[1]
    trees = {"old": str(Path(args.old).resolve()), "new": str(Path(args.new).resolve())}
    print(f"judge call A/B: old={trees['old']} new={trees['new']}; {args.judges} SC judges (direct aiohttp), "
          f"stub delay {args.latency_ms:g} ms, closed loop c={args.concurrency}, {args.seconds:g} s a point; "
          f"child on core 1, stub on core 0; load average {os.getloadavg()[0]:.1f} at the start", flush=True)
    results: dict[str, dict[str, list[float]]] = {n: {"judgefuse": [], "bare": []} for n in trees}
    passthrough = [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items() if k not in ("old", "new", "pairs")]
    try:
        for pair in range(args.pairs):
            for name in (["old", "new"] if pair % 2 == 0 else ["new", "old"]):
                out = subprocess.run([sys.executable, __file__, CHILD, trees[name], stub_url, *passthrough],
                                     capture_output=True, text=True, check=True, cwd=trees[name])
                got = json.loads(out.stdout.strip().splitlines()[-1])
                for key in got:
                    results[name][key].append(got[key])
                print(f"  {time.strftime('%H:%M:%S', time.gmtime())} load {os.getloadavg()[0]:5.1f}  {name}: "
                      f"CPU ms a judge call: judgefuse {got['judgefuse']:.4f}, bare {got['bare']:.4f}, "
                      f"judgefuse - bare {got['judgefuse'] - got['bare']:.4f}", flush=True)
    finally:
        stub.terminate()
        stub.wait()
    print(f"medians over {args.pairs} runs each (load average {os.getloadavg()[0]:.1f} at the end):")
    for name, values in results.items():
        jf, bare = statistics.median(values["judgefuse"]), statistics.median(values["bare"])
        print(f"    {name}: CPU ms a judge call: judgefuse {jf:.4f}, bare {bare:.4f}, judgefuse - bare "
              f"{statistics.median(a - b for a, b in zip(values['judgefuse'], values['bare'], strict=True)):.4f}")


if __name__ == "__main__":
    main()
