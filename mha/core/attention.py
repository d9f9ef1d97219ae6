"""Multi-head attention from scratch.

References:
- Vaswani et al. 2017, "Attention Is All You Need", section 3.2: scaled dot-product attention
  and multi-head attention (project per head -> attend in parallel -> concatenate -> W^O).
- Ainslie et al. 2023 (grouped-query attention) and Shazeer 2019 (multi-query attention): fewer
  K/V projections than heads, each read by a group of query heads.
- Hugging Face `BertSelfAttention`, PyTorch `nn.MultiheadAttention` and PyTorch's
  `scaled_dot_product_attention(..., enable_gqa=True)`: the references this module matches to
  float precision (tests/test_bert.py and tests/test_attention.py).

Shapes: B batch, T tokens, C = d_model, H heads, D = d_k (C / H unless the model says otherwise, as
Gemma 3's 256 beside C = 640 and H = 4); the heads' concatenation is H D wide and W^O maps it to C.

What 2025 decoders add, each an argument (Gemma 3): `d_head` other than C / H; `scale` other than
1 / sqrt(d_k); `qk_norm`, a per-head query/key norm (mha/core/norms.py); `window`, a sliding window
(mha/core/masks.py).

What the heads share has one spelling, `heads=(q, k, v)`: how many distinct projections each
role has, each dividing H. (H, H, H) is plain multi-head attention (the default), (1, 1, 1) one
shared Q/K/V (the lesson's check question), (H, G, G) grouped-query attention, (1, 1, H) shared
queries and keys with a value projection per head. Head i reads projection i // (H / n) of a
role with n of them.

`MultiHeadAttention.trace` is the reference: the formula written out step by step, keeping every
intermediate for the teaching pages; read it first. `forward` computes the same with two fast
paths (Q scaled before the matmul, in-place masking and softmax, no copy of the weights);
tests/test_attention.py proves every path equal to `trace` for every kind of split, padded,
causal and rotary (mha/core/rotary.py: positions inside q . k, as Llama-class decoders have them).
A query whose keys are all masked reads nothing: its weights and output are all zeros.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch
from torch import nn

from mha.core import rotary
from mha.core.fastpath import SOFTMAX_INTO as _SOFTMAX_INTO
from mha.core.fastpath import affine as _affine
from mha.core.fastpath import block as _block
from mha.core.fastpath import scaled_scores as _scaled_scores
from mha.core.masks import attention_mask_for
from mha.core.norms import HeadNorm

ROLES = ("q", "k", "v")


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V.

    q: (..., T, D), k: (..., S, D), v: (..., S, Dv).
    mask: bool, broadcastable to (..., T, S); True = may attend, False = blocked.
    scale: the factor on Q K^T; None = 1 / sqrt(d_k) (as torch's scaled_dot_product_attention).
    Blocked keys get exactly 0 weight; a query with every key blocked gets all-zero weights and
    an all-zero output. Returns (output (..., T, Dv), weights (..., T, S)).
    """
    s = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    scores = (q * s) @ k.transpose(-2, -1)  # (..., T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)  # (..., T, S)
    if mask is not None:
        weights = weights.masked_fill(~mask.any(-1, keepdim=True), 0.0)  # rows with no key
    return weights @ v, weights  # (..., T, Dv), (..., T, S)


@dataclass
class AttentionTrace:
    """Every intermediate of one multi-head attention pass (batch size B).

    x: (B, T, C) input token vectors.
    q, k, v: (B, H, T, D) per-head queries, keys and values (head i owns columns i*D:(i+1)*D of
      a role with H projections; with n < H it reads projection i // (H / n)).
    scores: (B, H, T, T) raw Q_i K_i^T.
    scaled: (B, H, T, T) scores times the scale, 1 / sqrt(D) unless the model sets another (or the raw
      scores if scaling was turned off).
    weights: (B, H, T, T) softmax over the keys a query may read; every row sums to 1, except a
      query with no key to read (all padding), whose row is all zeros.
    heads: (B, H, T, D) head outputs weights @ V_i.
    concat: (B, T, H D) head outputs side by side (C wide when D = C / H).
    output: (B, T, C) concat @ W^O^T + b^O.
    """

    x: torch.Tensor
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    scores: torch.Tensor
    scaled: torch.Tensor
    weights: torch.Tensor
    heads: torch.Tensor
    concat: torch.Tensor
    output: torch.Tensor


def valid_head_counts(d_model: int) -> list[int]:
    """The numbers of heads that split d_model evenly (the divisors of d_model)."""
    return [h for h in range(1, d_model + 1) if d_model % h == 0]


def role_heads(n_heads: int, heads: tuple[int, int, int] | None = None) -> tuple[int, int, int]:
    """The checked (q, k, v) projection counts: `heads`, or (H, H, H) when None; each divides H."""
    if heads is None:
        return (n_heads, n_heads, n_heads)
    if len(heads) != 3 or any(not isinstance(g, int) or g < 1 or n_heads % g for g in heads):
        raise ValueError(
            f"heads must be three head counts (Q, K, V) that divide n_heads={n_heads}; "
            f"valid counts: {valid_head_counts(n_heads)}, got {heads!r}"
        )
    return tuple(heads)


def _repeat_heads(t: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, n, ...) per-group tensors -> (B, n_heads, ...): group g serves heads g*r .. g*r + r - 1."""
    n = t.shape[1]
    return t if n == n_heads else t.repeat_interleave(n_heads // n, dim=1)


class MultiHeadAttention(nn.Module):
    """MultiHead(X) = Concat(head_1, ..., head_H) W^O, head_i = Attention(X W_i^Q, X W_i^K, X W_i^V).

    heads=(q, k, v): the number of distinct projections of each role (see the module docstring);
    None = (H, H, H). A role with n projections is one nn.Linear of n * D outputs, so a shared
    role (n = 1) is ONE C x D parameter: parameter counts, gradients and training keep it shared.
    causal=True: query t reads keys 0..t only (a decoder). rope_theta: rotary position embeddings
    with that base (mha/core/rotary.py): queries and keys are rotated by their position before the
    scores, as in Llama-class decoders; None = no positions inside attention (BERT adds them to
    the tokens before layer 0). d_head: D (None = C / H); W^O is C x H D. scale: the factor on
    Q K^T (None = 1 / sqrt(D)). qk_norm: the eps of a per-head RMS norm of queries and keys (HeadNorm,
    q_norm and k_norm), None = none. window: a sliding window of that many keys (causal only).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        heads: tuple[int, int, int] | None = None,
        bias: bool = True,
        causal: bool = False,
        rope_theta: float | None = None,
        d_head: int | None = None,
        scale: float | None = None,
        qk_norm: float | None = None,
        window: int | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(n_heads, int) or n_heads < 1:
            raise ValueError(f"n_heads must be a positive integer, got {n_heads!r}")
        if not isinstance(d_model, int) or d_model < 1:
            raise ValueError(f"d_model must be a positive integer, got {d_model!r}")
        if d_head is not None and (not isinstance(d_head, int) or d_head < 1):
            raise ValueError(f"d_head must be a positive integer, got {d_head!r}")
        if d_head is None and d_model % n_heads != 0:
            raise ValueError(
                f"d_model={d_model} is not divisible by n_heads={n_heads}; "
                f"valid head counts for d_model={d_model} are {valid_head_counts(d_model)}"
            )
        self.role_heads = role_heads(n_heads, heads)
        self.d_model, self.n_heads, self.causal, self.rope_theta = d_model, n_heads, causal, rope_theta
        self.d_head = d_model // n_heads if d_head is None else d_head
        self.own_d_head = d_head is not None  # set by the model (kept by with_heads), not C / H
        self.scale = 1.0 / math.sqrt(self.d_head) if scale is None else float(scale)
        self.own_scale = scale is not None
        attention_mask_for(None, 1, causal, window=window)  # checks the window
        self.window = window
        q_width, k_width, v_width = (g * self.d_head for g in self.role_heads)
        self.q_proj = nn.Linear(d_model, q_width, bias=bias)
        self.k_proj = nn.Linear(d_model, k_width, bias=bias)
        self.v_proj = nn.Linear(d_model, v_width, bias=bias)
        self.out_proj = nn.Linear(n_heads * self.d_head, d_model, bias=bias)
        self.qk_norm = qk_norm
        if qk_norm is not None:
            self.q_norm, self.k_norm = HeadNorm(self.d_head, qk_norm), HeadNorm(self.d_head, qk_norm)
        self._one_block()

    def _one_block(self) -> None:
        """Lay W^Q, W^K and W^V (and their biases) one after another in one block of memory, each
        still its own parameter (a view of its rows): forward then projects with one matrix
        product, as nn.MultiheadAttention does, instead of three smaller ones."""
        projs = (self.q_proj, self.k_proj, self.v_proj)
        widths = [p.out_features for p in projs]
        with torch.no_grad():
            for name in ("weight", "bias"):
                if getattr(self.q_proj, name) is None:
                    continue
                block = torch.cat([getattr(p, name) for p in projs])  # (q + k + v widths, ...)
                for p, part in zip(projs, block.split(widths)):
                    setattr(p, name, nn.Parameter(part))  # a view: the block's storage

    @property
    def projection(self) -> str:
        """A name for the split, read from role_heads: "distinct" (H, H, H), "shared" (1, 1, 1)
        or "mixed" (anything else: grouped K/V, or some roles shared)."""
        H = self.n_heads
        if self.role_heads == (H, H, H):
            return "distinct"
        return "shared" if self.role_heads == (1, 1, 1) else "mixed"

    @property
    def shared_roles(self) -> tuple[str, ...]:
        """The roles ("q", "k", "v") with one projection used by every head (none for H = 1)."""
        return tuple(r for r, g in zip(ROLES, self.role_heads) if g == 1 and self.n_heads > 1)

    def with_heads(
        self, heads: tuple[int, int, int] | None, n_heads: int | None = None, empty: bool = False
    ) -> MultiHeadAttention:
        """A new module (new weights) with this one's width, bias, mask and positions, and the split
        `heads` of `n_heads` heads (this module's count by default). empty=True: its weights are not
        allocated (built on torch's meta device); the caller sets every projection (set_projection), and
        the query/key norms, when the head size is kept, are this module's own tensors."""
        bias = self.q_proj.bias is not None
        n = self.n_heads if n_heads is None else n_heads
        with torch.device("meta") if empty else contextlib.nullcontext():
            own = dict(d_head=self.d_head if self.own_d_head else None, scale=self.scale if self.own_scale else None)
            m = MultiHeadAttention(
                self.d_model,
                n,
                heads,
                bias,
                self.causal,
                self.rope_theta,
                **own,
                qk_norm=self.qk_norm,
                window=self.window,
            )
        if empty:  # the query/key norms act per head, whatever the split: the new module reads this one's
            for role in self.norm_roles:
                mine = getattr(self, role).weight
                if mine.shape == getattr(m, role).weight.shape:
                    m.set_projection(role, mine)
        return m

    def set_projection(self, role: str, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        """Point projection `role` ("q", "k", "v" or "o" for W^O; "q_norm", "k_norm" for the norms'
        weights, no bias) at these tensors, not at copies of them: a module made from another's
        weights shares them, and one that changes a projection gives it new tensors, so the other
        module never sees the change. A module with biases given none gets zeros (a model without
        biases)."""
        if role in ("q_norm", "k_norm"):
            norm = getattr(self, role)
            if tuple(weight.shape) != tuple(norm.weight.shape):
                raise ValueError(f"{role}: weight of shape {tuple(weight.shape)}, expected {tuple(norm.weight.shape)}")
            norm.weight = weight if isinstance(weight, nn.Parameter) else nn.Parameter(weight, requires_grad=False)
            return
        proj = self.out_proj if role == "o" else getattr(self, f"{role}_proj")
        if tuple(weight.shape) != tuple(proj.weight.shape):
            raise ValueError(f"{role}: weight of shape {tuple(weight.shape)}, expected {tuple(proj.weight.shape)}")

        def param(t: torch.Tensor) -> nn.Parameter:
            return t if isinstance(t, nn.Parameter) else nn.Parameter(t, requires_grad=False)  # same storage

        proj.weight = param(weight)
        if proj.bias is not None:
            proj.bias = param(bias if bias is not None else torch.zeros(proj.out_features, dtype=weight.dtype))

    def borrowing(self) -> MultiHeadAttention:
        """A new module of this one's structure whose projections are this module's own tensors (no
        copy): what a caller may change by replacing projections (set_projection), never in place."""
        m = self.with_heads(self.role_heads, empty=True)
        for role in (*ROLES, "o"):
            proj = self.out_proj if role == "o" else getattr(self, f"{role}_proj")
            m.set_projection(role, proj.weight, proj.bias)
        for role in self.norm_roles:
            m.set_projection(role, getattr(self, role).weight)
        return m.train(self.training).requires_grad_(False)

    @property
    def norm_roles(self) -> tuple[str, ...]:
        """("q_norm", "k_norm") with a per-head query/key norm, else ()."""
        return ("q_norm", "k_norm") if self.qk_norm is not None else ()

    def shares_weights_with(self, other: MultiHeadAttention) -> bool:
        """Whether `other` has this module's structure and reads the very same tensors (borrowing,
        scratch_layer): then it computes exactly what this module computes."""
        mine, theirs = list(self.parameters()), list(other.parameters())
        return (
            self.role_heads == other.role_heads
            and len(mine) == len(theirs)
            and all(a.data_ptr() == b.data_ptr() and a.shape == b.shape for a, b in zip(mine, theirs))
        )

    def silent_output(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, C) what forward(x, head_mask=0 for every head) returns as its output, without
        computing the heads: every head's output is zeroed before W^O, so only W^O's bias is left
        (zeros without a bias). Exactly equal, at a fraction of the work."""
        B, T, _ = x.shape
        bias = self.out_proj.bias
        if bias is None:
            return x.new_zeros(B, T, self.d_model)
        return bias.to(x.dtype).expand(B, T, self.d_model).clone()

    def num_parameters(self) -> int:
        """Number of learned parameters (weights and biases)."""
        return sum(p.numel() for p in self.parameters())

    @staticmethod
    def parameter_count(  # noqa: PLR0913
        d_model: int,
        n_heads: int,
        heads: tuple[int, int, int] | None = None,
        bias: bool = True,
        d_head=None,
        qk_norm=False,
    ) -> int:
        """Parameters of MultiHeadAttention(d_model, n_heads, heads, bias, d_head, qk_norm), without
        building it: C x (q + k + v) D for W^Q, W^K, W^V, H D x C for W^O, biases, two D-vectors of norms."""
        D = d_model // n_heads if d_head is None else d_head
        qkv = sum(role_heads(n_heads, heads)) * D
        return d_model * qkv + n_heads * D * d_model + bias * (qkv + d_model) + 2 * D * qk_norm

    # ---- the reference ------------------------------------------------------------------------

    def trace(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None, scale: bool = True) -> AttentionTrace:
        """The formula, step by step, keeping every intermediate (see AttentionTrace for shapes).

        scale=False skips the division by sqrt(d_k), to show how the softmax saturates.
        """
        B, T, _ = x.shape
        H, D = self.n_heads, self.d_head

        def per_head(t: torch.Tensor) -> torch.Tensor:
            n = t.shape[-1] // D  # this role's projections: H, G (grouped) or 1 (shared)
            return _repeat_heads(t.view(B, T, n, D).transpose(1, 2), H)  # (B, n, T, D) -> (B, H, T, D)

        # 1. project: head i gets columns i*D:(i+1)*D of X W^Q (and of X W^K, X W^V); a role with
        #    n < H projections gives head i its group g = i // (H / n), columns g*D:(g+1)*D
        q, k, v = per_head(self.q_proj(x)), per_head(self.k_proj(x)), per_head(self.v_proj(x))
        # 2. a per-head RMS norm of every query and key, when the model has one (Gemma 3)
        if self.qk_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        # 3. positions: rotary embeddings rotate q and k by their position (BERT added them to x instead)
        if self.rope_theta is not None:
            q, k = rotary.rotate(q, self.rope_theta), rotary.rotate(k, self.rope_theta)
        # 4. which keys each query may read: padding, the future when causal, and beyond the window
        mask = attention_mask_for(attention_mask, T, self.causal, x.device, self.window)
        # 5. scaled dot-product attention in every head at once
        factor = self.scale if scale else 1.0
        heads, weights = scaled_dot_product_attention(q, k, v, mask, factor)  # (B, H, T, D), (B, H, T, T)
        scores = q @ k.transpose(-2, -1)  # (B, H, T, T): the raw scores, for the page
        # 6. concatenate the heads and project back with W^O
        concat = heads.transpose(1, 2).reshape(B, T, H * D)  # (B, H, T, D) -> (B, T, H D)
        output = self.out_proj(concat)  # (B, T, C)
        return AttentionTrace(x, q, k, v, scores, scores * factor, weights, heads, concat, output)

    # ---- the fast paths (the same numbers, proven equal to trace in tests/test_attention.py) ---

    def forward(
        self, x: torch.Tensor, attention_mask: torch.Tensor | None = None, head_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x: (B, T, C); attention_mask: (B, T), 1 = token, 0 = padding; head_mask: (H,) or
        (B, H), multiplies each head's output before W^O (0 removes the head, as in Michel et
        al. 2019; a tensor that requires grad gives their gate gradients).

        Returns (output (B, T, C), weights (B, H, T, T)); padded keys, and future keys when the
        module is causal, get weight 0.
        """
        B, T, C = x.shape
        if C != self.d_model:
            raise ValueError(f"input width {C} does not match d_model={self.d_model}")
        q, k, v = self._project(x)  # (B, q, T, D), (B, k, T, D), (B, v, T, D)
        if self.qk_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope_theta is not None:
            q, k = rotary.rotate(q, self.rope_theta), rotary.rotate(k, self.rope_theta)
        mask = attention_mask_for(attention_mask, T, self.causal, x.device, self.window)
        hq, hk, hv = self.role_heads
        grouped = hq == self.n_heads and hk == hv  # distinct, grouped-query or multi-query
        heads, weights = (self._grouped if grouped else self._by_role)(q, k, v, mask)
        return self._mix(heads, head_mask), weights

    def _project(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Q, K and V for every head, each role a (B, n, T, D) view.
        The projections read the module's own weights as they are (no fused or transposed copy is
        kept), so a module that borrows a model's weights (LoadedModel's layers) adds no memory;
        when W^Q, W^K, W^V lie in one block (_one_block) and need no gradient, one product reads it."""
        B, T, C = x.shape
        D = self.d_head
        x2 = x.reshape(B * T, C)  # (B T, C)
        w, b = self._qkv_block()
        if w is not None and not (torch.is_grad_enabled() and self._trains_qkv()):  # the block's views carry no grad
            nq, nk, nv = self.role_heads
            if nq == nk == nv:  # one view (B, T, 3, n, D) -> three (B, n, T, D)
                return _affine(x2, w, b).view(B, T, 3, nq, D).permute(2, 0, 3, 1, 4).unbind(0)
            qkv = _affine(x2, w, b).view(B, T, -1, D).transpose(1, 2)  # (B T, (q+k+v) D) -> (B, q+k+v, T, D)
            return qkv.split(self.role_heads, 1)  # (B, n, T, D) each
        return [  # (B T, n D) -> (B, n, T, D) each
            _affine(x2, p.weight, p.bias).view(B, T, n, D).transpose(1, 2)
            for p, n in zip((self.q_proj, self.k_proj, self.v_proj), self.role_heads)
        ]

    def _trains_qkv(self) -> bool:
        """Whether any of W^Q, W^K, W^V or their biases takes a gradient."""
        return any(t.requires_grad for p in (self.q_proj, self.k_proj, self.v_proj) for t in p.parameters())

    def _qkv_block(self) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """(W, b): W^Q, W^K, W^V stacked (and their biases, None without) as views of the one block
        _one_block lays them in, or (None, None) when they are apart (a module that borrows a
        model's separate tensors). Worked out once per set of parameters (a new one, set_projection's,
        is another object; .to() and its kind move them all, and _apply forgets the views): the
        check itself took 9 us, a third of the gap to nn.MultiheadAttention on a short sentence."""
        own = [self._modules[f"{r}_proj"]._parameters for r in ROLES]  # nn.Module's attribute lookup is slow
        tensors = [d["weight"] for d in own] + [d.get("bias") for d in own]
        key = (*map(id, tensors), tensors[0].data_ptr())
        cached = self.__dict__.get("_qkv_cache")
        if cached is None or cached[0] != key:
            bias = tensors[3] is not None
            w, b = _block(tensors[:3]), _block(tensors[3:]) if bias else None
            cached = self.__dict__["_qkv_cache"] = (key, (w, b) if b is not None or not bias else (None, None))
        return cached[1]

    def _apply(self, fn, recurse: bool = True):  # nn.Module._apply's signature
        """nn.Module._apply (.to, .double, ...), forgetting _qkv_block's views of the old tensors."""
        self.__dict__.pop("_qkv_cache", None)
        return super()._apply(fn, recurse)

    def _grouped(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Head outputs (B, H, T, D) and weights (B, H, T, T) for heads=(H, G, G): the r = H / G
        query heads of a group are stacked along the token axis, so each group's K and V are read
        in place, never copied r times (G = H: plain multi-head attention, r = 1)."""
        B, H, T, D = q.shape
        G = k.shape[1]
        r = H // G
        q3 = q.reshape(B * G, r * T, D)  # (B G, r T, D): a group's r query heads one after another
        scores = _scaled_scores(q3, k.reshape(B * G, T, D), self.scale).view(
            B, H, T, T
        )  # (B G, r T, T) -> (B, H, T, T)
        weights = self._softmax(scores, mask)  # (B, H, T, T)
        heads = torch.bmm(weights.view(B * G, r * T, T), v.reshape(B * G, T, D)).view(B, H, T, D)  # (B, H, T, D)
        return heads, weights

    def _by_role(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Head outputs (B, H, T, D) and weights (B, H, T, T) for any other split, e.g. (1, 1, 1) or
        (1, 1, H): the attention is computed once per distinct pair of Q and K groups (A = lcm(q, k)
        of them, 1 for shared Q and K) and read by the H / A heads of that group, each through its
        own values."""
        B, _, T, D = q.shape
        H = self.n_heads
        A = math.lcm(*self.role_heads[:2])
        q3 = _repeat_heads(q, A).reshape(B * A, T, D)  # (B A, T, D): views for one batch, copies for several
        scores = _scaled_scores(q3, _repeat_heads(k, A).reshape(B * A, T, D), self.scale).view(
            B, A, T, T
        )  # (B, A, T, T)
        weights = self._softmax(scores, mask)  # (B, A, T, T)
        r = H // A  # head i reads attention group i // r
        v = _repeat_heads(v, H).reshape(B, A, r, T, D)  # (B, A, r, T, D)
        heads = torch.matmul(weights.unsqueeze(2), v).view(B, H, T, D)  # (B, H, T, D)
        return heads, weights.unsqueeze(2).expand(B, A, r, T, T).reshape(B, H, T, T)

    @staticmethod
    def _softmax(scores: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """Masked softmax over the keys of (B, n, T, T) scores; a query with no key to read gets
        all-zero weights. Without a gradient it is written over the scores: PyTorch has no public
        in-place softmax, and allocating a new (B, H, T, T) made the fast path 8-15 % slower than
        nn.MultiheadAttention at (8, 512, 768, 12) in bench/bench_attention.py."""
        if mask is not None:
            scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
        if scores.requires_grad:
            weights = torch.softmax(scores, dim=-1)  # (B, n, T, T)
        else:
            weights = _SOFTMAX_INTO(scores, -1, False, out=scores)  # (B, n, T, T)
        if mask is not None:
            empty = ~mask.any(-1, keepdim=True)  # (B, 1, T or 1, 1): a query with no key at all
            weights = weights.masked_fill(empty, 0.0) if weights.requires_grad else weights.masked_fill_(empty, 0.0)
        return weights

    def _mix(self, heads: torch.Tensor, head_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(B, H, T, D) head outputs, gated by head_mask ((H,) or (B, H)), concatenated and mixed
        by W^O -> (B, T, C)."""
        B, H, T, D = heads.shape
        if head_mask is not None:
            heads = heads * head_mask.to(heads.dtype).reshape(-1, H, 1, 1)  # (B or 1, H, 1, 1)
        concat = heads.transpose(1, 2).reshape(B * T, H * D)  # (B, H, T, D) -> (B T, H D)
        o = self._modules["out_proj"]._parameters  # W^O and its bias, without nn.Module's slow attribute lookup
        return _affine(concat, o["weight"], o.get("bias")).view(B, T, self.d_model)  # (B, T, C)
