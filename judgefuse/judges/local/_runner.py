"""Subprocess entry point: serve one GGUF over llama.cpp's OpenAI-compatible HTTP server.

Run by :class:`judgefuse.judges.local.server.LocalModelServer` as
``python -m judgefuse.judges.local._runner --model PATH ...``; not meant to be imported.

It lives in its own process so that llama.cpp never blocks the gateway's event loop and a
crash of the model (llama.cpp aborts on some bad files) cannot take the gateway down.

Protocol with the parent:

* once ``xllamacpp.Server`` has loaded the model and bound its socket, the runner writes
  ``{"address": "http://HOST:PORT", "pid": PID}`` to ``--ready-file`` (atomically: a
  temporary file renamed into place). With ``--port 0`` llama.cpp picks a free port and
  the address carries the real one, so there is no port race;
* it then waits until SIGTERM/SIGINT, or until its parent process is gone (the parent pid
  changes), and shuts the server down (``del server`` joins llama.cpp's threads); when
  orphaned it also removes the parent's temporary directory, which nobody else will;
* exit codes: 0 clean stop, 2 bad arguments or missing file, 3 the model failed to load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import threading
from pathlib import Path


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="judgefuse-local-runner")
    p.add_argument("--model", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--ctx-size", type=int, default=4096)
    p.add_argument("--parallel", type=int, default=1)
    p.add_argument("--alias", default="")
    p.add_argument("--ready-file", required=True)
    return p.parse_args(argv)


def _write_ready(path: Path, payload: dict[str, object]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload), encoding="utf-8")
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    model = Path(args.model)
    if not model.is_file():
        print(f"judgefuse-local-runner: model file not found: {model}", file=sys.stderr, flush=True)
        return 2

    stop = threading.Event()

    def _on_signal(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    parent = os.getppid()

    import xllamacpp as xlc  # imported late: a missing wheel is reported by the parent's log tail

    params = xlc.CommonParams()
    params.model.path = str(model)
    params.n_ctx = args.ctx_size
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.hostnames = [args.host]
    params.port = args.port
    if args.alias:
        params.model_alias = {args.alias}
    try:
        server = xlc.Server(params)
    except Exception as exc:  # noqa: BLE001 - llama.cpp reports a bad file as RuntimeError
        print(f"judgefuse-local-runner: failed to load {model}: {exc!r}", file=sys.stderr, flush=True)
        return 3

    address = str(server.listening_address)
    _write_ready(Path(args.ready_file), {"address": address, "pid": os.getpid()})
    print(f"judgefuse-local-runner: serving {model} at {address}", file=sys.stderr, flush=True)

    orphaned = False
    while not stop.wait(0.5):
        if os.getppid() != parent:  # the parent died without stopping us: do not linger
            print("judgefuse-local-runner: parent gone, stopping", file=sys.stderr, flush=True)
            orphaned = True
            break

    del server  # the destructor stops llama.cpp's HTTP server and main loop
    print("judgefuse-local-runner: stopped", file=sys.stderr, flush=True)
    workdir = Path(args.ready_file).parent
    if orphaned and workdir.name.startswith("judgefuse-local-"):  # nobody else will clean it
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
