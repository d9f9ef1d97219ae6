"""What every loaded model family shares (mha/models/bert.py, mha/models/llama.py): a read-only Hugging Face
model whose attention layers are rebuilt from scratch on its own weights (the same tensors: one
copy of the weights in memory).

A family says how its layers are shaped (`_new_layer`: the MultiHeadAttention structure) and where
its attention weights are (`_projections`: W^Q, W^K, W^V and W^O as nn.Linear); this class builds
each layer's template once (run_layers reads it, never changes it) and hands out modules that
borrow its tensors: a change (collapse, pooling, uptraining) makes new tensors, never writes.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import threading
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from mha.core.attention import ROLES, MultiHeadAttention


def weights_digest(model: torch.nn.Module) -> str:
    """A SHA-256 of every weight of a torch module, by name: equal digests, bit-identical weights."""
    h = hashlib.sha256()
    for k, v in model.state_dict().items():
        h.update(k.encode() + v.detach().cpu().contiguous().numpy().tobytes())
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


CHECKPOINT_MB = 32.0  # a kept batch's states (task.py, lm_task.py): every layer's while they fit, else every k-th


@dataclass
class Checkpoints:
    """A batch's hidden states entering some layers (every `every`-th, and L: after the last),
    kept to resume a run there instead of from the embeddings: resume(start) gives the nearest
    kept layer at or before `start`, and run_layers from it recomputes at most every - 1 layers,
    with the same operations on the same batch: the same numbers as states kept for every layer.
    `within` keeps every layer's of a small model and every 4th of bert-base's shape on the bundled
    pairs (31 MB instead of 100)."""

    states: dict[int, torch.Tensor]

    @classmethod
    def within(cls, batches: list[list[torch.Tensor]], budget_mb: float | None = None) -> list[Checkpoints]:
        """Checkpoints.of each batch's states, every k-th layer's for the smallest k whose kept states
        of all batches fit budget_mb (default CHECKPOINT_MB) together; k = 1: every layer's."""
        n = len(batches[0])  # L + 1
        per = sum(t.nbytes for b in batches for t in b) / n  # bytes of one layer's states, all batches
        budget = (CHECKPOINT_MB if budget_mb is None else budget_mb) * 2**20
        every = next((k for k in range(1, n) if (len(range(0, n - 1, k)) + 1) * per <= budget), max(1, n - 1))
        return [cls.of(b, every) for b in batches]

    @classmethod
    def of(cls, states: list[torch.Tensor], every: int = 1) -> Checkpoints:
        """From the states entering layers 0..L-1 and the last ones (L + 1 tensors)."""
        last = len(states) - 1
        return cls({i: h for i, h in enumerate(states) if i % every == 0 or i == last})

    def resume(self, start: int) -> tuple[torch.Tensor, int]:
        """(the kept states at the nearest layer k <= start, k): run layers k.. from them."""
        k = max(i for i in self.states if i <= start)
        return self.states[k], k

    @property
    def last(self) -> torch.Tensor:
        return self.states[max(self.states)]


class LoadedModel:
    """A Hugging Face model (eager attention, eval mode) with its tokenizer, shared and read-only."""

    n_layers: int
    n_heads: int
    d_model: int
    family: str  # "encoder" (BERT) or "decoder"

    @property
    def who(self) -> str:
        """The model in one word, for a page's sentence: "BERT", or the decoder's name up to its first hyphen."""
        return "BERT" if self.family == "encoder" else self.name.split("-")[0] or "the decoder"

    @property
    def kv_groups(self) -> int:
        """How many K/V projections a layer has: n_heads unless K and V come in groups."""
        return getattr(self, "kv_heads", self.n_heads)

    def __init__(self, name: str, model, tokenizer) -> None:
        self.name, self.model, self.tokenizer = name, model, tokenizer
        # the fast tokenizer keeps truncation settings in shared mutable state: one caller at a time
        self._tokenizer_lock = threading.Lock()
        self._templates: dict[int, MultiHeadAttention] = {}  # scratch_layer's modules borrow from these
        self._capture = threading.local()  # where this thread's forward pass writes attention (attentions_into)
        self._hooks_lock = threading.Lock()
        self._hooked = False

    def _attention_modules(self) -> list[nn.Module]:
        """The model's own attention modules, layer by layer; each forward returns (output, weights)."""
        raise NotImplementedError

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
        run,
        replace: dict[int, MultiHeadAttention] | None = None,
        head_mask: torch.Tensor | np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The model's forward pass on run's tokens, layer by layer, with the attention of the
        layers in `replace` computed by the given from-scratch modules instead, and the heads
        where head_mask (L, H) is 0 removed (see run_layers).

        Returns (hidden states (L + 1, T, C), attention of every head (L, H, T, T)); with no
        change they equal run.hidden_states and run.attentions (to float precision).
        """
        h = self._embed(run)  # (1, T, C)
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

    def _embed(self, run) -> torch.Tensor:
        """(1, T, C) the hidden states entering layer 0 for run's tokens."""
        raise NotImplementedError

    def _layer(
        self, i: int, h: torch.Tensor, attn: MultiHeadAttention, mask: torch.Tensor | None, gate: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Layer i on h (B, T, C) with `attn` as its attention: (the layer's output, attention weights)."""
        raise NotImplementedError

    def encode_with(self, run, **changes) -> np.ndarray:
        """attend_with's hidden states only (L + 1, T, C): changes are replace= and head_mask=."""
        return self.attend_with(run, **changes)[0]

    def scratch_layer(self, layer: int) -> MultiHeadAttention:
        """A from-scratch MultiHeadAttention holding layer `layer`'s real weights: fed
        run.layer_input(layer), it reproduces the layer's attention and the attention sub-layer's
        output (W^O applied, before the residual). Its projections are the model's own tensors, not
        copies (MultiHeadAttention.borrowing): whoever changes one gives it new tensors
        (set_projection) or trains a deep copy; nothing writes to them in place."""
        return self._template(layer).borrowing()

    def _new_layer(self) -> MultiHeadAttention:
        """A layer of this family's structure, weights not set yet."""
        raise NotImplementedError

    def _projections(self, layer: int) -> tuple[nn.Linear, nn.Linear, nn.Linear, nn.Linear]:
        """The model's own W^Q, W^K, W^V and W^O of `layer`."""
        raise NotImplementedError

    def _template(self, layer: int) -> MultiHeadAttention:
        """The module scratch_layer borrows from, built once per layer on the model's own tensors
        (no copy): read-only (run_layers uses it)."""
        if not 0 <= layer < self.n_layers:
            raise ValueError(f"layer must be in 0..{self.n_layers - 1}, got {layer}")
        template = self._templates.get(layer)
        if template is None:
            with torch.inference_mode(False), torch.device("meta"):  # the structure, no weights of its own
                template = self._new_layer()
            for role, theirs in zip((*ROLES, "o"), self._projections(layer)):
                if theirs.weight.dtype != torch.float32:
                    raise TypeError(f"layer {layer}'s {role} is {theirs.weight.dtype}: load the model in float32")
                template.set_projection(role, theirs.weight, theirs.bias)  # the model's tensors, not copies
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
