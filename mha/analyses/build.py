"""The build page's computation: the from-scratch module on a sentence, stage by stage, with the
parity check against BERT and the shuffle check (attention without positions only permutes).

Everything is computed on copies of the weights; the cached model is never modified.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch

from mha.analyses import collapse, metrics
from mha.core.attention import AttentionTrace, MultiHeadAttention

if TYPE_CHECKING:
    from mha.models.family import LoadedModel
    from mha.models.run import Run

WeightSource = Literal["bert", "random"]
PERMUTED = 1e-4  # largest |output(shuffled) - output reordered| that still counts as "only reordered"


@dataclass
class Stages:
    """One pass of the module on BERT's input to a layer (batch of one, every array numpy).

    trace: every intermediate (see AttentionTrace; batch axis kept, size 1).
    tokens: the tokens in the order fed (shuffled if asked); perm: positions in that order.
    parity: max |from-scratch - BERT| attention weight, when comparable (BERT's weights, BERT's
        head count, distinct projections, scaling on), else None.
    shuffle_error: max |output(shuffled) - output reordered| when shuffled, else None.
    order_errors: for a module with a causal mask or rotary positions, when shuffled: the same
        error with the module as it is, without its causal mask (if it has one), and without mask
        and rotary positions (if it has them; the last entry has every order-aware part removed),
        else None.
    head_spread: max |weights of head h - weights of head g| over every two heads (metrics.head_spread).
    measures: the collapse measures (head diversity, overlaps, effective number of heads, ...).
    score_std, scaled_std, max_weight: per head (H,): the spread of Q_i K_i^T and of the scaled
        scores (metrics.score_spread: std over the keys, mean over the queries, as the collapse and
        subspaces pages measure it), and the mean over queries of the largest weight (a causal first
        query, which reads only itself with weight 1, left out, as the head maps' words leave it).
    """

    trace: AttentionTrace
    tokens: list[str]
    perm: np.ndarray
    parity: float | None
    shuffle_error: float | None
    head_spread: float
    measures: dict[str, float]
    score_std: np.ndarray
    scaled_std: np.ndarray
    max_weight: np.ndarray
    order_errors: dict[str, float] | None = None
    unrotated: np.ndarray | None = None  # (H, T, T) the weights without the rotary positions, if the module has them
    window: int | None = None  # the sliding window the module ran with (the layer's own, or the learner's)
    window_changed: bool = False  # the learner set a window other than the layer's own

    @property
    def q_heads_side_by_side(self) -> np.ndarray:
        """Q = X W^Q with the heads' slices side by side -> (T, H * D)."""
        q = self.trace.q[0]  # (H, T, D)
        return q.transpose(1, 0, 2).reshape(q.shape[1], -1)  # (T, H*D)


def resplit(m: MultiHeadAttention, n_heads: int) -> MultiHeadAttention:
    """The same matrices as m (the same tensors), read as n_heads heads of C / n_heads."""
    if m.projection != "distinct":
        raise ValueError("resplit reads distinct projections (every head its own W^Q, W^K, W^V)")
    out = m.with_heads(None, n_heads, empty=True)
    for role in ("q", "k", "v", "o"):  # the same tensors, read as other heads
        proj = m.out_proj if role == "o" else getattr(m, f"{role}_proj")
        out.set_projection(role, proj.weight, proj.bias)
    return out.eval().requires_grad_(False)


def random_module(d_model: int, n_heads: int, seed: int, like: MultiHeadAttention | None = None) -> MultiHeadAttention:
    """A module with PyTorch's default nn.Linear init, U(-1/sqrt(C), 1/sqrt(C)) for every weight
    and bias, drawn from its own generator (the global RNG is shared by every session); with the
    structure of `like` (K/V groups, causal mask, rotary positions) if given."""
    g = torch.Generator().manual_seed(seed)
    m = MultiHeadAttention(d_model, n_heads) if like is None else like.with_heads(like.role_heads)
    bound = d_model**-0.5  # every projection here has fan_in = C
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.rand(p.shape, generator=g) * (2 * bound) - bound)
    return m.eval().requires_grad_(False)


def build_module(
    bert: LoadedModel, layer: int, n_heads: int, weights: WeightSource = "bert", seed: int = 0, shared: bool = False
) -> MultiHeadAttention:
    """A from-scratch module: layer `layer`'s real weights (or a seeded random init) split into
    n_heads heads; shared=True gives every head one W^Q, W^K, W^V: the mean of the heads' slices
    rescaled to a slice's norm (collapse.DEFAULT_SOURCE, as on every page)."""
    if weights == "bert":
        m = bert.scratch_layer(layer)
        if n_heads != m.n_heads:
            m = resplit(m, n_heads)
    elif weights == "random":
        like = bert.scratch_layer(layer) if n_heads == bert.n_heads else None  # the model's own structure
        m = random_module(bert.d_model, n_heads, seed, like)
    else:
        raise ValueError(f"weights must be 'bert' or 'random', got {weights!r}")
    return collapse.shared_module(m) if shared else m


def _numpy_trace(tr: AttentionTrace) -> AttentionTrace:
    return AttentionTrace(*(t.detach().numpy() for t in vars(tr).values()))


def build_stages(
    bert: LoadedModel,
    run: Run,
    layer: int,
    n_heads: int,
    weights: WeightSource = "bert",
    seed: int = 0,
    shared: bool = False,
    scale: bool = True,
    shuffle: bool = False,
    window: int | None = None,
) -> Stages:
    """Run the module built by build_module on BERT's input to `layer`, stage by stage; window: a
    sliding window of that many keys in place of the layer's own (a causal layer only; None: its own)."""
    m = build_module(bert, layer, n_heads, weights, seed, shared)
    changed = window is not None and window != m.window
    if changed:
        if not m.causal:
            raise ValueError("a sliding window needs a causal layer: a token of an encoder reads every key")
        m = copy.copy(m)  # the same parameters, another mask: the cached layer keeps its own window
        m.window = window
    x = run.layer_input(layer)  # (1, T, C)
    T = x.shape[1]
    perm = np.random.default_rng(seed).permutation(T) if shuffle else np.arange(T)
    with torch.inference_mode():
        tr = _numpy_trace(m.trace(x[:, perm], scale=scale))
        shuffle_error, order_errors = None, None
        if shuffle:
            shuffle_error = _shuffle_error(m, x, perm, scale)
            if m.causal or m.rope_theta is not None:
                order_errors = {"as the model has it": shuffle_error}
                mask = "the causal mask and its window" if m.window is not None else "the causal mask"
                variants = [(f"without {mask}", {"causal": False, "window": None})] if m.causal else []
                if m.rope_theta is not None:  # last: the layer with every order-aware part removed
                    name = "without the mask and the rotary positions" if m.causal else "without the rotary positions"
                    variants.append((name, {"causal": False, "window": None, "rope_theta": None}))
                for name, changes in variants:
                    variant = copy.copy(m)
                    variant.__dict__.update(changes)
                    order_errors[name] = _shuffle_error(variant, x, perm, scale)
    w = tr.weights[0]  # (H, T, T)
    unrotated = None
    if m.rope_theta is not None:
        plain = copy.copy(m)
        plain.rope_theta = None
        with torch.inference_mode():
            unrotated = plain.trace(x[:, perm], scale=scale).weights[0].numpy()  # (H, T, T)
    parity = None
    order_free = not (m.causal or m.rope_theta is not None)  # shuffled, the model's own weights are only permuted
    own = weights == "bert" and n_heads == bert.n_heads and not shared and scale and not changed
    if own and (order_free or not shuffle):
        bert_w = run.attentions[layer][:, perm][:, :, perm]  # BERT's own weights, same token order
        parity = float(np.abs(w - bert_w).max())
    return Stages(
        trace=tr,
        tokens=[run.tokens[i] for i in perm],
        perm=perm,
        parity=parity,
        shuffle_error=shuffle_error,
        head_spread=metrics.head_spread(w),
        measures=collapse.measures_from(m, tr).summary(),
        score_std=metrics.score_spread(tr.scores[0], m.causal, m.window),
        scaled_std=metrics.score_spread(tr.scaled[0], m.causal, m.window),
        max_weight=w[:, 1:].max(-1).mean(-1) if m.causal and w.shape[1] > 1 else w.max(-1).mean(-1),  # (H,)
        order_errors=order_errors,
        unrotated=unrotated,
        window=m.window,
        window_changed=changed,
    )


def outside_window(weights: np.ndarray, window: int) -> float:
    """The share of attention weight (H, T, T) that a window of `window` keys would hide (key j of
    query i with j <= i - window), averaged over the heads and the T - window queries it cuts; 0 when
    the text is no longer than the window."""
    T = weights.shape[-1]
    if T <= window:
        return 0.0
    i, j = np.indices((T, T))
    hidden = (weights * (j <= i - window)).sum(-1)  # (H, T): each query's weight beyond the window
    return float(hidden[:, window:].mean())


def _shuffle_error(m: MultiHeadAttention, x: torch.Tensor, perm: np.ndarray, scale: bool) -> float:
    """max |m(x in the order perm) - m(x) reordered by perm|: 0 when m only permutes."""
    shuffled = m.trace(x[:, perm], scale=scale).output[0].numpy()  # (T, C)
    plain = m.trace(x, scale=scale).output[0].numpy()  # (T, C) in sentence order
    return float(np.abs(shuffled - plain[perm]).max())


@dataclass
class Stripe:
    """What stands out in a layer's output (T, C): the column (output dimension) whose mean over the
    tokens is largest in size, that mean and the median column's, and the largest cell."""

    dim: int
    mean: float
    typical: float
    runner_up: float  # the next largest |mean| of a column
    peak: float
    peak_token: int
    peak_dim: int

    @property
    def stands_out(self) -> bool:
        """One column alone: its mean at least 3x the median column's and 1.5x the next largest, so
        that one colour down every token is that column's, not one of many alike."""
        return abs(self.mean) >= max(3 * self.typical, 1.5 * self.runner_up)


def output_stripe(output: np.ndarray) -> Stripe:
    """The standout column and cell of an attention output (T, C): after W^O every dimension mixes
    all heads, so a column of one colour is one dimension written alike for every token, not a
    head boundary."""
    o = np.asarray(output, dtype=np.float64)  # (T, C)
    mean = o.mean(0)  # (C,)
    size = np.sort(np.abs(mean))  # (C,) ascending
    dim = int(np.argmax(np.abs(mean)))
    t, d = np.unravel_index(int(np.argmax(np.abs(o))), o.shape)
    second = float(size[-2]) if size.size > 1 else 0.0
    return Stripe(dim, float(mean[dim]), float(np.median(size)), second, float(o[t, d]), int(t), int(d))
