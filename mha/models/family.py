"""The one interface every model family implements (mha/models/bert.py, llama.py, gpt2.py): a
read-only Hugging Face model whose attention layers are rebuilt from scratch on its own weights
(the same tensors: one copy of the weights in memory).

A family declares what it is (`_traits`), how it tokenizes and embeds, Transformers' own forward
pass, one layer with a given attention, and where its attention weights are (`_projections`);
this class builds each layer's from-scratch template once from the traits (run_layers reads it,
never changes it) and hands out modules that borrow its tensors: a change (collapse, pooling,
uptraining) makes new tensors, never writes.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import hashlib
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from mha.core.attention import ROLES, MultiHeadAttention
from mha.models import q8
from mha.models.run import Run
from mha.models.traits import Traits


def weights_digest(model: torch.nn.Module) -> str:
    """A SHA-256 of every weight of a torch module, by name: equal digests, bit-identical weights."""
    h = hashlib.sha256()
    for k, v in model.state_dict().items():
        if k.endswith(".table.scales"):
            continue
        if k.endswith(".table.codes"):  # a Q8_0 table (q8.py) is hashed as the float32 weight it stands for
            table = model.get_submodule(k.removesuffix(".codes"))
            h.update(k.replace("table.codes", "weight").encode())
            for start in range(0, table.n_tokens, q8.BLOCK_ROWS):  # a block at a time: never 671 MB at once
                h.update(table.block(start).numpy().reshape(-1).view(np.uint8))
            continue
        h.update(k.encode())
        h.update(v.detach().cpu().contiguous().numpy().reshape(-1).view(np.uint8))  # the bytes, read in place
    return h.hexdigest()


def stacked(tensors: list[torch.Tensor]) -> np.ndarray:
    """(n, ...) float32 numpy of n (1, ...) tensors, emptying the list as it copies: each tensor is
    freed once copied, so a 512-token run's attentions are held once, not twice (a stacked copy
    beside the model's tuple)."""
    first = tensors[0]
    out = np.empty((len(tensors), *first.shape[1:]), dtype=np.float32)  # pages are taken as they are written
    for i in range(len(tensors)):
        out[i] = tensors[i][0].float().numpy()
        tensors[i] = None  # the list held the last reference
    return out


@dataclass
class Tokens:
    """One text (or pair) tokenized for a forward pass: ids (1, T), segments (1, T) or None (a
    model without segments), the token strings, the word of each token (None: a special token) and
    how many tokens past the model's maximum were dropped."""

    ids: torch.Tensor
    segments: torch.Tensor | None
    tokens: list[str]
    word_ids: list[int | None]
    dropped: int


class LoadedModel(abc.ABC):
    """The one interface every family implements: a Hugging Face model (eager attention, eval mode,
    float32) with its tokenizer, shared by every session and never changed.

    Declared per family (abstract below): `_traits` (what the model is), `tokenize`, `embed`,
    `_states` (Transformers' own forward pass), `attention_input`, `_layer` (one layer with a given
    attention), `_projections` (W^Q, W^K, W^V, W^O as tensors), `_attention_modules` and
    `reference_attention` (Transformers' own attention, the parity reference). Written once here:
    `attend` (a Run), `layer_inputs`, `attend_with`/`encode_with`, `run_layers` and
    `scratch_layer` (the from-scratch layer on the model's own tensors, built from the traits).
    A family names its Transformers `model_type` (MODEL_TYPE), its auto class (AUTO) and the Hub
    models it offers (HUB: name -> (Hub id, description)); mha/models/registry.py lists families.
    """

    MODEL_TYPE: ClassVar[str]
    AUTO: ClassVar[str] = "AutoModel"
    HUB: ClassVar[dict[str, tuple[str, str]]] = {}

    def __init__(self, name: str, model, tokenizer) -> None:
        self.name, self.model, self.tokenizer = name, model, tokenizer
        self.traits: Traits = self._traits()
        # the fast tokenizer keeps truncation settings in shared mutable state: one caller at a time
        self._tokenizer_lock = threading.Lock()
        self._templates: dict[int, MultiHeadAttention] = {}  # scratch_layer's modules borrow from these
        self._capture = threading.local()  # where this thread's forward pass writes attention (attentions_into)
        self._hooks_lock = threading.Lock()
        self._hooked = False

    @classmethod
    def load(cls, where: str, name: str, local_files_only: bool = False) -> LoadedModel:
        """The family's model from a folder or Hub id, eager attention, float32, never remote code."""
        import transformers
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        kwargs = dict(trust_remote_code=False, local_files_only=local_files_only)
        tokenizer = transformers.AutoTokenizer.from_pretrained(where, **kwargs)
        for copy_in_python in ("_vocab", "_merges"):  # Transformers keeps what built the Rust tokenizer:
            if hasattr(tokenizer, copy_in_python):  # 145 MB for Gemma 3's 262,144 tokens, never read again
                setattr(tokenizer, copy_in_python, None)
        auto = getattr(transformers, cls.AUTO)
        model = auto.from_pretrained(where, attn_implementation="eager", dtype=torch.float32, **kwargs)
        if Path(where).is_dir():
            q8.attach(model, where)  # a converted decoder's token table, as its GGUF stores it
        if getattr(model.config, "model_type", "") != cls.MODEL_TYPE:
            raise ValueError(f"{name} is a {model.config.model_type!r} model, not {cls.MODEL_TYPE!r}")
        model.eval().requires_grad_(False)
        return cls(name, model, tokenizer)

    # the structure, read from the traits (one way to ask each question)
    @property
    def n_layers(self) -> int:
        return self.traits.n_layers

    @property
    def n_heads(self) -> int:
        return self.traits.n_heads

    @property
    def d_model(self) -> int:
        return self.traits.d_model

    @property
    def max_length(self) -> int:
        return self.traits.max_length

    # ---- declared per family ----
    @abc.abstractmethod
    def _traits(self) -> Traits:
        """What this model is, read from its config (checked: a structure the from-scratch layer
        cannot reproduce raises ValueError)."""

    @abc.abstractmethod
    def tokenize(self, text: str, text_b: str | None = None) -> Tokens:
        """One text (or pair), truncated to max_length; ValueError for an empty text."""

    @abc.abstractmethod
    def embed(self, ids: torch.Tensor, segments: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T, C) the hidden states entering layer 0 for token ids (B, T) (segments (B, T))."""

    @abc.abstractmethod
    def _states(
        self, ids: torch.Tensor, segments: torch.Tensor | None, mask: torch.Tensor | None, last: bool = True
    ) -> list[torch.Tensor]:
        """Transformers' own forward pass: L + 1 of (B, T, C), the states entering layers 0..L-1
        and the last layer's output (before any final norm); last=False: the first L only (what
        layer_inputs needs). mask (B, T): 1 = token."""

    @abc.abstractmethod
    def attention_input(self, layer: int, h: torch.Tensor) -> torch.Tensor:
        """(B, T, C) what layer `layer`'s attention reads of the states h entering the layer: h
        itself (post-norm), or its norm (pre-norm)."""

    def residual_added(self, layer: int, out: torch.Tensor) -> torch.Tensor:
        """(B, T, C) what layer `layer` adds to the residual stream from its attention's output `out`:
        `out` itself, unless the family normalises it first (Gemma 3's post-attention norm)."""
        return out

    @abc.abstractmethod
    def _layer(
        self, i: int, h: torch.Tensor, attn: MultiHeadAttention, mask: torch.Tensor | None, gate: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer i on h (B, T, C) with `attn` as its attention: (the layer's output, attention weights)."""

    @abc.abstractmethod
    def _projections(self, layer: int) -> tuple[tuple[torch.Tensor, torch.Tensor | None], ...]:
        """The model's own (weight, bias) of W^Q, W^K, W^V and W^O of `layer`, in nn.Linear's
        orientation (out, in): the tensors themselves or views of them, never copies."""

    def _norms(self, layer: int) -> tuple[torch.Tensor, ...]:
        """The weights of layer `layer`'s per-head query and key norms (Traits.qk_norm), () without."""
        return ()

    @abc.abstractmethod
    def _attention_modules(self) -> list[nn.Module]:
        """The model's own attention modules, layer by layer; each forward returns (output, weights)."""

    @abc.abstractmethod
    def reference_attention(self, run: Run, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Transformers' own eager attention of `layer` on run.layer_input(layer): (output (1, T, C)
        before the residual, weights (1, H, T, T)), what the from-scratch layer is checked against."""

    def encode_batch(self, texts: list[str] | tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids of many texts, right-padded with 0: (ids (N, T), lengths (N,))."""
        with self._tokenizer_lock:
            ids = [self.tokenizer(t)["input_ids"][: self.max_length] for t in texts]
        T = max(len(i) for i in ids)
        return torch.tensor([i + [0] * (T - len(i)) for i in ids]), torch.tensor([len(i) for i in ids])

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """(B, T, V) next-token logits of the last layer's output h (B, T, C): a next-token model's."""
        raise ValueError(f"{self.name} predicts no next token (its task is {self.traits.task})")

    # ---- written once ----
    @torch.inference_mode()
    def attend(self, text: str, text_b: str | None = None) -> Run:
        """Run the text (or pair) through the model; attentions and hidden states as numpy."""
        tok = self.tokenize(text, text_b)
        T = tok.ids.shape[1]
        attentions = np.empty((self.n_layers, self.n_heads, T, T), dtype=np.float32)  # (L, H, T, T)
        with self.attentions_into(attentions) as written:
            states = self._states(tok.ids, tok.segments, None)  # L + 1 of (1, T, C)
        if not all(written):
            raise RuntimeError("the model returned no attentions: load it with attn_implementation='eager'")
        inputs = None
        if self.traits.pre_norm:  # what each attention reads, when it is not the hidden state itself
            inputs = stacked([self.attention_input(i, states[i]) for i in range(self.n_layers)])  # (L, T, C)
        return Run(
            traits=self.traits,
            tokens=tok.tokens,
            word_ids=tok.word_ids,
            segment_ids=[0] * T if tok.segments is None else tok.segments[0].tolist(),
            attentions=attentions,
            hidden_states=stacked(states),  # (L + 1, T, C)
            attention_inputs=inputs,
            truncated=tok.dropped > 0,
            n_dropped=tok.dropped,
            input_ids=tok.ids[0].tolist(),
        )

    @torch.inference_mode()
    def layer_inputs(self, texts: list[str], layer: int, batch: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
        """What layer `layer`'s attention reads for many texts, right-padded: (x (N, T, C) float32,
        mask (N, T) long, 1 = token), T = the longest text. Padding never changes a real token's
        states (padded keys are masked, or come after every real token under a causal mask)."""
        if not 0 <= layer < self.n_layers:
            raise ValueError(f"layer must be in 0..{self.n_layers - 1}, got {layer}")
        states, masks = [], []
        for start in range(0, len(texts), batch):
            ids, segments, mask = self._padded(texts[start : start + batch])  # (b, t) each
            h = self._states(ids, segments, None if self.traits.causal else mask, last=False)[layer]  # (b, t, C)
            states.append(self.attention_input(layer, h).float())
            masks.append(mask)
        T = max(s.shape[1] for s in states)
        x = torch.cat([F.pad(s, (0, 0, 0, T - s.shape[1])) for s in states])  # (N, T, C)
        mask = torch.cat([F.pad(m, (0, T - m.shape[1])) for m in masks])  # (N, T)
        return x.clone(), mask.clone()  # ordinary tensors, usable outside inference mode

    def _padded(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """(ids (N, T), segments (N, T) or None, mask (N, T) long) of texts right-padded."""
        ids, lengths = self.encode_batch(texts)  # (N, T), (N,)
        return ids, None, (torch.arange(ids.shape[1])[None] < lengths[:, None]).long()

    def _new_layer(self, layer: int) -> MultiHeadAttention:
        """Layer `layer`'s from-scratch attention of this model's structure (weights not set): H query
        heads, G K/V projections (a K/V group is one projection), its head size and score scale, its
        query/key norm, its mask and window, its rotary base, all from the traits."""
        t = self.traits
        heads = (t.n_heads, t.kv_groups, t.kv_groups)
        return MultiHeadAttention(
            t.d_model,
            t.n_heads,
            heads,
            bias=t.bias,
            causal=t.causal,
            rope_theta=t.theta(layer),
            d_head=t.head_dim,
            scale=t.score_scale,
            qk_norm=t.qk_norm,
            window=t.window(layer),
        )

    @contextlib.contextmanager
    def attentions_into(self, out: np.ndarray) -> Iterator[list[bool]]:
        """While inside, a forward pass of the model in this thread writes layer i's attention
        weights (batch item 0, (H, T, T)) into out[i] as each layer computes them, so a long
        sentence's attentions exist once (not also as the model's tuple of tensors, then a stacked
        copy). Yields the layers written. The hooks are registered once, do nothing in other
        threads or outside this block, and change no result (other sessions share the model)."""
        with self._hooks_lock:
            if not self._hooked:
                for i, module in enumerate(self._attention_modules()):
                    module.register_forward_hook(_KeepWeights(self, i))
                self._hooked = True
        written = [False] * len(out)
        self._capture.target = (out, written)
        try:
            yield written
        finally:
            self._capture.target = None

    def _keep_weights(self, layer: int, module: nn.Module, args: tuple, output: tuple) -> None:
        target = getattr(self._capture, "target", None)
        if target is None:
            return
        if not isinstance(output, tuple) or len(output) < 2 or output[1] is None:
            raise RuntimeError("the model returned no attention weights: load it with attn_implementation='eager'")
        out, written = target
        out[layer] = output[1][0].detach().float().numpy()  # (H, T, T)
        written[layer] = True

    @functools.cached_property
    def digest(self) -> str:
        """weights_digest of the model, once (the model is read-only)."""
        return weights_digest(self.model)

    @torch.inference_mode()
    def attend_with(
        self,
        run: Run,
        replace: dict[int, MultiHeadAttention] | None = None,
        head_mask: torch.Tensor | np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The model's forward pass on run's tokens, layer by layer, with the attention of the
        layers in `replace` computed by the given from-scratch modules instead, and the heads
        where head_mask (L, H) is 0 removed (see run_layers).

        Returns (hidden states (L + 1, T, C), attention of every head (L, H, T, T)); with no
        change they equal run.hidden_states and run.attentions (to float precision).
        """
        segments = None if not any(run.segment_ids) else torch.tensor([run.segment_ids])  # (1, T)
        h = self.embed(torch.tensor([run.input_ids]), segments)  # (1, T, C)
        mask = None if head_mask is None else torch.as_tensor(head_mask, dtype=torch.float32)
        states, attentions = self.run_layers(h, replace=replace, head_mask=mask)
        hidden = torch.cat([h, *states]).float().numpy()  # (L+1, T, C)
        return hidden, torch.cat(attentions).float().numpy()  # (L, H, T, T)

    def run_layers(
        self,
        h: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        replace: dict[int, MultiHeadAttention] | None = None,
        head_mask: torch.Tensor | None = None,
        start: int = 0,
        keep: bool = True,
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The layers start..L-1 on hidden states h (B, T, C) entering layer `start`.

        Attention is computed by the from-scratch modules (layer i's real weights, or replace[i]);
        head_mask (..., L, H) gates each head's output before W^O (0 removes it). Reads the
        model's sub-modules (norms, feed-forward) without changing them or adding hooks, so other
        users of the shared model are unaffected. Returns (hidden states after each layer
        (B, T, C), attention of each layer (B, H, T, T)); with keep=False only the last layer's
        states and no attention (a long batch's memory).
        """
        replace = replace or {}
        states, attentions = [], []
        for i in range(start, self.n_layers):
            attn = replace.get(i) or self._template(i)
            gate = None if head_mask is None else head_mask[..., i, :]  # (H,) or (B, H)
            if not keep and gate is not None and not gate.requires_grad and not bool(gate.any()):
                attn = _Silent(attn)  # every head removed: W^O's bias alone, the heads not computed
            h, weights = self._layer(i, h, attn, attention_mask, gate)
            if keep:
                states.append(h)
                attentions.append(weights)
        return (states if keep else [h] if start < self.n_layers else []), attentions

    def encode_with(self, run: Run, **changes) -> np.ndarray:
        """attend_with's hidden states only (L + 1, T, C): changes are replace= and head_mask=."""
        return self.attend_with(run, **changes)[0]

    def scratch_layer(self, layer: int) -> MultiHeadAttention:
        """A from-scratch MultiHeadAttention holding layer `layer`'s real weights: fed
        run.layer_input(layer), it reproduces the layer's attention and the attention sub-layer's
        output (W^O applied, before the residual). Its projections are the model's own tensors, not
        copies (MultiHeadAttention.borrowing): whoever changes one gives it new tensors
        (set_projection) or trains a deep copy; nothing writes to them in place."""
        return self._template(layer).borrowing()

    def _template(self, layer: int) -> MultiHeadAttention:
        """The module scratch_layer borrows from, built once per layer on the model's own tensors
        (no copy): read-only (run_layers uses it)."""
        if not 0 <= layer < self.n_layers:
            raise ValueError(f"layer must be in 0..{self.n_layers - 1}, got {layer}")
        template = self._templates.get(layer)
        if template is None:
            with torch.inference_mode(False), torch.device("meta"):  # the structure, no weights of its own
                template = self._new_layer(layer)
            for role, (weight, bias) in zip((*ROLES, "o"), self._projections(layer)):
                if weight.dtype != torch.float32:
                    raise TypeError(f"layer {layer}'s {role} is {weight.dtype}: load the model in float32")
                template.set_projection(role, weight, bias)  # the model's tensors (or views), not copies
            for role, weight in zip(template.norm_roles, self._norms(layer)):
                template.set_projection(role, weight)
            template.eval().requires_grad_(False)
            self._templates[layer] = template
        return template


class _Silent:
    """A layer's attention with every head removed, for run_layers(keep=False): its output is W^O's
    bias (MultiHeadAttention.silent_output) and it has no attention weights to return."""

    def __init__(self, attn: MultiHeadAttention) -> None:
        self.attn = attn

    def __call__(self, x: torch.Tensor, mask: torch.Tensor | None = None, gate: torch.Tensor | None = None):
        return self.attn.silent_output(x), None


class _KeepWeights:
    """The forward hook of attentions_into: layer `layer`'s weights into its owner's target. A
    copy of the model (copy.deepcopy) keeps the same hook, which writes only inside its owner's
    attentions_into block in the owner's thread (the copy's own LoadedModel adds its own)."""

    def __init__(self, owner: LoadedModel, layer: int) -> None:
        # weakly: the owner holds the model that holds this hook, and a cycle outlives the owner
        # (a model dropped from the app's cache stayed until a full collection, or for good)
        self.owner, self.layer = weakref.ref(owner), layer

    def __call__(self, module: nn.Module, args: tuple, output: tuple) -> None:
        owner = self.owner()
        if owner is not None:
            owner._keep_weights(self.layer, module, args, output)

    def __deepcopy__(self, memo: dict) -> _KeepWeights:
        return self  # not the owner, its lock and its thread-local state
