"""The ``local`` entry of a panel YAML: which GGUF to serve and how.

    judges:
      - name: smollm2
        local:
          model: smollm2            # or qwen2.5-coder-1.5b (after its install command), or a .gguf path
          port: 0                   # 0 = a free port picked by llama.cpp
          threads: 2
          ctx_size: 4096

``LocalModelConfig.model_validate(entry["local"]).build()`` gives a not-yet-started
:class:`~judgefuse.judges.local.server.LocalModelServer`; pass its ``base_url`` to litellm as
``api_base`` with a model name ``openai/<anything>`` and ``api_key="none"``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from judgefuse.judges.local.models import resolve_gguf
from judgefuse.judges.local.server import LocalModelServer


class LocalModelConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(default="smollm2", min_length=1, description="model name or GGUF path")
    models_dir: Path | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65535)
    threads: int = Field(default=2, ge=1)
    ctx_size: int = Field(default=4096, ge=256)
    parallel: int = Field(default=1, ge=1)
    startup_timeout: float = Field(default=120.0, gt=0)
    log_path: Path | None = None

    def build(self) -> LocalModelServer:
        """Resolve the model (``ModelNotInstalledError`` / ``FileNotFoundError``) and make a server."""
        return LocalModelServer(
            resolve_gguf(self.model, models_dir=self.models_dir),
            host=self.host,
            port=self.port,
            threads=self.threads,
            ctx_size=self.ctx_size,
            parallel=self.parallel,
            alias=Path(self.model).stem if self.model.endswith(".gguf") else self.model,
            startup_timeout=self.startup_timeout,
            log_path=self.log_path,
        )
