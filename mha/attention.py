"""Multi-head attention from scratch.

References:
- Vaswani et al. 2017, "Attention Is All You Need", section 3.2: scaled dot-product attention
  and multi-head attention (project per head -> attend in parallel -> concatenate -> W^O).
- Hugging Face `BertSelfAttention` and PyTorch `nn.MultiheadAttention`: the references this
  module matches to float precision (tests/test_bert.py and tests/test_attention.py).

Shapes: B batch, T tokens, C = d_model, H heads, D = d_k = C / H.

Two paths compute the same thing: `forward` is the fast one (one fused projection, Q scaled
before the matmul, in-place masking); `trace` is the readable one that keeps every
intermediate for the teaching page and calls `scaled_dot_product_attention`, the one written
definition of the formula. A query whose keys are all masked reads nothing: its weights and
its output are all zeros in both paths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

Projection = Literal["distinct", "shared"]


def _key_mask(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """Turn a (B, T) padding mask (1 = real token, 0 = padding) into a (B, 1, 1, T) bool mask."""
    if attention_mask is None:
        return None
    if attention_mask.dim() != 2:
        raise ValueError(
            f"attention_mask must have shape (B, T) with 1 for tokens and 0 for padding, "
            f"got shape {tuple(attention_mask.shape)}"
        )
    return attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)


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
    q, k, v: (B, H, T, D) per-head queries, keys and values (head i owns columns i*D:(i+1)*D).
    scores: (B, H, T, T) raw Q_i K_i^T.
    scaled: (B, H, T, T) scores / sqrt(D) (or the raw scores if scaling was turned off).
    weights: (B, H, T, T) softmax over keys; every row sums to 1.
    heads: (B, H, T, D) head outputs weights @ V_i.
    concat: (B, T, C) head outputs side by side.
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


ROLES = ("q", "k", "v")


def role_heads(
    n_heads: int,
    projection: Projection = "distinct",
    kv_heads: int | None = None,
    heads: tuple[int, int, int] | None = None,
) -> tuple[int, int, int]:
    """How many distinct projections each of Q, K, V has, checked: (q, k, v), each dividing n_heads.

    projection="distinct": (H, H, H); kv_heads=G: (H, G, G); projection="shared": (1, 1, 1);
    heads=(q, k, v) names them directly, e.g. (1, 1, H): one W^Q and one W^K for every head, a
    W_i^V per head (shared queries and keys, distinct values).
    """
    if projection not in ("distinct", "shared"):
        raise ValueError(f"projection must be 'distinct' or 'shared', got {projection!r}")
    given = [name for name, v in (("kv_heads", kv_heads), ("heads", heads)) if v is not None]
    if projection == "shared" and given:
        raise ValueError(f"a shared projection has one head per role: leave {' and '.join(given)} unset")
    if len(given) > 1:
        raise ValueError("give kv_heads or heads, not both")
    divisors = [g for g in range(1, n_heads + 1) if n_heads % g == 0]
    if heads is not None:
        if len(heads) != 3 or any(not isinstance(g, int) or g < 1 or n_heads % g for g in heads):
            raise ValueError(
                f"heads must be three head counts (Q, K, V) that divide n_heads={n_heads}; "
                f"valid counts: {divisors}, got {heads!r}"
            )
        return tuple(heads)
    if projection == "shared":
        return (1, 1, 1)
    if kv_heads is None:
        return (n_heads, n_heads, n_heads)
    if not isinstance(kv_heads, int) or kv_heads < 1 or n_heads % kv_heads:
        raise ValueError(f"kv_heads must divide n_heads={n_heads}; valid: {divisors}, got {kv_heads!r}")
    return (n_heads, kv_heads, kv_heads)


def _repeat_heads(t: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, n, ...) per-group tensors -> (B, n_heads, ...): group g serves heads g*r .. g*r + r - 1."""
    n = t.shape[1]
    return t if n == n_heads else t.repeat_interleave(n_heads // n, dim=1)


class MultiHeadAttention(nn.Module):
    """MultiHead(X) = Concat(head_1, ..., head_H) W^O, head_i = Attention(X W_i^Q, X W_i^K, X W_i^V).

    projection="distinct": every head has its own W_i^Q, W_i^K, W_i^V (C x D); stored as one
    C x C matrix per role, split along the output axis into H slices (as in BERT).
    kv_heads=G (distinct only, G divides H): grouped-query attention (Ainslie et al. 2023). Every
    head keeps its own W_i^Q, but K and V have only G heads (k_proj, v_proj: G x D outputs) and
    query head h reads K/V group h // (H / G), as PyTorch's scaled_dot_product_attention(...,
    enable_gqa=True) and Hugging Face's repeat_kv do. G = 1 is multi-query attention (Shazeer
    2019); G = H (the default) is plain multi-head attention.
    projection="shared": the lesson's "simplification": one W^Q, W^K, W^V (C x D) used by every
    head, so every head computes the same attention. W^O stays C x C.
    heads=(q, k, v): any other split, by role, e.g. (1, 1, H): one W^Q and one W^K shared by every
    head (one attention map for all), a W_i^V per head. Head i reads group i // (H / n) of a role
    with n projections.

    Sharing is structure: a shared role is ONE parameter (C x D), so parameter counts, gradients
    and training keep it shared. `role_heads` says how many projections each role has.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        projection: Projection = "distinct",
        bias: bool = True,
        kv_heads: int | None = None,
        heads: tuple[int, int, int] | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(n_heads, int) or n_heads < 1:
            raise ValueError(f"n_heads must be a positive integer, got {n_heads!r}")
        if not isinstance(d_model, int) or d_model < 1:
            raise ValueError(f"d_model must be a positive integer, got {d_model!r}")
        if d_model % n_heads != 0:
            raise ValueError(
                f"d_model={d_model} is not divisible by n_heads={n_heads}; "
                f"valid head counts for d_model={d_model} are {valid_head_counts(d_model)}"
            )
        self.role_heads = role_heads(n_heads, projection, kv_heads, heads)
        self.d_model, self.n_heads = d_model, n_heads
        self.d_head = d_model // n_heads
        q_width, k_width, v_width = (g * self.d_head for g in self.role_heads)
        self.q_proj = nn.Linear(d_model, q_width, bias=bias)
        self.k_proj = nn.Linear(d_model, k_width, bias=bias)
        self.v_proj = nn.Linear(d_model, v_width, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self._fast_key: list | None = None  # see _fast_weights
        self._fast: tuple | None = None

    @property
    def projection(self) -> str:
        """What the heads share, read from the structure: "distinct" (every head its own W_i^Q, W_i^K,
        W_i^V), "shared" (one of each for every head: the lesson's check question), or "mixed"
        (grouped K/V or some roles shared: role_heads says which)."""
        H = self.n_heads
        if self.role_heads == (H, H, H):
            return "distinct"
        return "shared" if self.role_heads == (1, 1, 1) else "mixed"

    @property
    def kv_heads(self) -> int:
        """The number of K heads (= V heads in MHA, GQA and MQA)."""
        return self.role_heads[1]

    @property
    def shared_roles(self) -> tuple[str, ...]:
        """The roles ("q", "k", "v") with one projection used by every head (none for H = 1)."""
        return tuple(r for r, g in zip(ROLES, self.role_heads) if g == 1 and self.n_heads > 1)

    def _parameters_by_name(self) -> tuple[torch.Tensor | None, ...]:
        """The eight weights and biases (a bias is None when the module has none)."""
        return tuple(
            getattr(m, n) for m in (self.q_proj, self.k_proj, self.v_proj, self.out_proj) for n in ("weight", "bias")
        )

    def num_parameters(self) -> int:
        """Number of learned parameters (weights and biases)."""
        return sum(p.numel() for p in self.parameters())

    @staticmethod
    def parameter_count(
        d_model: int, n_heads: int, projection: Projection = "distinct", bias: bool = True, **structure: Any
    ) -> int:
        """Parameters of a layer built with these arguments (`structure`: kv_heads= or heads=, as
        the constructor takes them), without building it."""
        per_role = role_heads(n_heads, projection, **structure)
        widths = sum(per_role) * (d_model // n_heads) + d_model  # W^Q, W^K, W^V, W^O
        return d_model * widths + bias * widths

    def _fast_weights(self) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor, torch.Tensor | None]:
        """Weights laid out for the fast path: ((W^Q/sqrt(D) | W^K | W^V)^T, its bias, W^O^T, b^O).

        Stacking the three projections makes one matmul; folding 1/sqrt(D) into W^Q scales Q
        before the scores at no cost; transposed copies feed addmm directly. When no gradient
        is needed they are cached and rebuilt only when a weight changes (in place or moved).
        """
        projs = (self.q_proj, self.k_proj, self.v_proj)
        tracked = [t for t in self._parameters_by_name() if t is not None]
        grad = torch.is_grad_enabled() and any(t.requires_grad for t in tracked)
        # inference tensors (a module built under inference_mode) have no version counter
        cacheable = not grad and not any(t.is_inference() for t in tracked)
        key = [(t.data_ptr(), t._version) for t in tracked] if cacheable else None
        cached = self._fast if cacheable and self._fast_key == key else None
        # weights cached in inference mode are inference tensors, which autograd may not save
        # (for a gate or an input that needs a gradient): then they are rebuilt as ordinary ones
        saving = torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
        if cached is not None and not (saving and cached[0].is_inference()):
            return cached
        w = torch.cat([m.weight for m in projs])  # (Wq + 2 Wkv, C)
        scale = torch.ones(w.shape[0], 1, dtype=w.dtype, device=w.device)  # (Wq + 2 Wkv, 1)
        scale[: self.q_proj.out_features] = 1.0 / math.sqrt(self.d_head)
        w_t = (w * scale).t().contiguous()  # (C, Wq + 2 Wkv)
        b = None if projs[0].bias is None else torch.cat([m.bias for m in projs]) * scale[:, 0]
        o_t = self.out_proj.weight.t().contiguous()  # (C, C), input axis first
        fast = (w_t, b, o_t, self.out_proj.bias)
        if cacheable:  # the weights first: a thread that sees the new key finds them ready
            self._fast = fast
            self._fast_key = key
        return fast

    def forward(
        self, x: torch.Tensor, attention_mask: torch.Tensor | None = None, head_mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x: (B, T, C); attention_mask: (B, T), 1 = token, 0 = padding; head_mask: (H,) or
        (B, H), multiplies each head's output before W^O (0 removes the head, as in Michel et
        al. 2019; a tensor that requires grad gives their gate gradients).

        Returns (output (B, T, C), weights (B, H, T, T)); padded keys get weight 0.
        """
        B, T, C = x.shape
        H, D = self.n_heads, self.d_head
        if C != self.d_model:
            raise ValueError(f"input width {C} does not match d_model={self.d_model}")
        w_t, b, o_t, o_b = self._fast_weights()
        grad = torch.is_grad_enabled() and (w_t.requires_grad or x.requires_grad)
        hq, hk, hv = self.role_heads
        if not (hq == hk == hv and hq in (1, H)):  # grouped K/V, or another split by role
            split = self._grouped_heads if hq == H and hk == hv else self._role_heads
            heads, weights = split(x, attention_mask, w_t, b, grad)
            return self._mix(heads, o_t, o_b, head_mask), weights
        # 1. project Q (pre-scaled), K, V for every head with one matmul; the bias is added
        #    while copying into a contiguous per-head layout, so no later matmul copies again
        heads_in = hq  # H (distinct) or 1 (shared)
        qkv = (x.reshape(B * T, C) @ w_t).view(B, T, 3, heads_in, D)  # (B, T, 3, H or 1, D)
        qkv = qkv.permute(2, 0, 3, 1, 4)  # (3, B, H or 1, T, D), strided
        if b is None:
            qkv = qkv.contiguous()
        else:
            bias = b.view(3, 1, heads_in, 1, D)  # (3, 1, H or 1, 1, D)
            qkv = torch.add(qkv, bias, out=qkv.new_empty(qkv.shape)) if not grad else qkv + bias
        if heads_in == 1:
            qkv = qkv.expand(3, B, H, T, D)  # shared: every head reads the same Q, K, V
        q, k, v = qkv.unbind(0)  # each (B, H, T, D)
        # 2. scores = Q_i K_i^T / sqrt(D), every head at once
        scores = torch.matmul(q, k.transpose(-2, -1))  # (B, H, T, T)
        weights = self._softmax(scores, attention_mask)  # (B, H, T, T)
        # 4. head outputs, concatenated along the feature axis, mixed by W^O
        heads = torch.matmul(weights, v)  # (B, H, T, D)
        return self._mix(heads, o_t, o_b, head_mask), weights

    @staticmethod
    def _softmax(scores: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """Step 3 of forward on (B, H, T, T) scores: masked softmax over the keys."""
        mask = _key_mask(attention_mask)
        if mask is not None:
            scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
        # 3. weights = softmax over keys; a query with no key to read gets all-zero weights.
        #    Without a gradient the softmax is written over the scores: PyTorch has no public
        #    in-place softmax, and allocating a new (B, H, T, T) made this path 8-15 % slower
        #    than nn.MultiheadAttention at (8, 512, 768, 12) in bench/bench_attention.py.
        if scores.requires_grad:
            weights = torch.softmax(scores, dim=-1)  # (B, H, T, T)
        else:
            weights = torch.ops.aten._softmax.out(scores, -1, False, out=scores)  # (B, H, T, T)
        if mask is not None:
            empty = ~mask.any(-1, keepdim=True)  # (B, 1, 1, 1): a sequence with no token at all
            weights = weights.masked_fill(empty, 0.0) if weights.requires_grad else weights.masked_fill_(empty, 0.0)
        return weights

    @staticmethod
    def _mix(
        heads: torch.Tensor, o_t: torch.Tensor, o_b: torch.Tensor | None, head_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Step 4 of forward: (B, H, T, D) head outputs, gated by head_mask ((H,) or (B, H)),
        concatenated and mixed by W^O -> (B, T, C)."""
        B, H, T, D = heads.shape
        if head_mask is not None:
            heads = heads * head_mask.to(heads.dtype).reshape(-1, H, 1, 1)  # (B or 1, H, 1, 1)
        concat = heads.transpose(1, 2).reshape(B * T, H * D)  # (B*T, C)
        out = concat @ o_t if o_b is None else torch.addmm(o_b, concat, o_t)  # (B*T, C)
        return out.view(B, T, H * D)

    def _grouped_heads(self, x, attention_mask, w_t, b, grad) -> tuple[torch.Tensor, torch.Tensor]:
        """forward's head outputs (B, H, T, D) and weights with G < H K/V heads: the r = H / G
        query heads of a group are stacked along the token axis, so each group's K and V are read
        in place, never copied H / G times."""
        B, T, C = x.shape
        H, G, D = self.n_heads, self.kv_heads, self.d_head
        r = H // G
        qkv = (x.reshape(B * T, C) @ w_t).view(B, T, H + 2 * G, D).permute(0, 2, 1, 3)  # (B, H+2G, T, D)
        if b is not None:
            bias = b.view(1, H + 2 * G, 1, D)
            qkv = torch.add(qkv, bias, out=qkv.new_empty(qkv.shape)) if not grad else qkv + bias
        else:
            qkv = qkv.contiguous()
        q, k, v = qkv[:, :H], qkv[:, H : H + G], qkv[:, H + G :]  # (B, H, T, D), (B, G, T, D) x 2
        scores = torch.matmul(q.reshape(B, G, r * T, D), k.transpose(-2, -1)).view(B, H, T, T)  # (B, H, T, T)
        weights = self._softmax(scores, attention_mask)  # (B, H, T, T)
        heads = torch.matmul(weights.view(B, G, r * T, T), v).view(B, H, T, D)  # (B, H, T, D)
        return heads, weights

    def _role_heads(self, x, attention_mask, w_t, b, grad) -> tuple[torch.Tensor, torch.Tensor]:
        """forward's head outputs (B, H, T, D) and weights for any other split by role, e.g. one
        W^Q and W^K for every head with a W_i^V per head: the attention is computed once per
        distinct pair of Q and K groups (A = lcm(q, k) of them, 1 for shared Q and K) and read by
        the H / A heads of that group, each through its own values."""
        B, T, C = x.shape
        H, D = self.n_heads, self.d_head
        hq, hk, hv = self.role_heads
        qkv = x.reshape(B * T, C) @ w_t  # (B*T, (q + k + v) D)
        if b is not None:
            qkv = qkv + b
        qkv = qkv.view(B, T, hq + hk + hv, D).transpose(1, 2)  # (B, q + k + v, T, D)
        q, k, v = qkv.split((hq, hk, hv), dim=1)  # (B, q, T, D), (B, k, T, D), (B, v, T, D)
        A = math.lcm(hq, hk)
        scores = torch.matmul(_repeat_heads(q, A), _repeat_heads(k, A).transpose(-2, -1))  # (B, A, T, T)
        weights = self._softmax(scores, attention_mask)  # (B, A, T, T)
        r = H // A  # head i reads attention group i // r
        v = _repeat_heads(v, H).reshape(B, A, r, T, D)  # (B, A, r, T, D)
        heads = torch.matmul(weights.unsqueeze(2), v).view(B, H, T, D)  # (B, H, T, D)
        return heads, weights.unsqueeze(2).expand(B, A, r, T, T).reshape(B, H, T, T)

    def trace(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None, scale: bool = True) -> AttentionTrace:
        """The readable path: every intermediate, step by step (see AttentionTrace for shapes).

        scale=False skips the division by sqrt(d_k), to show how the softmax saturates.
        """
        B, T, C = x.shape
        H, D = self.n_heads, self.d_head

        def split(t: torch.Tensor) -> torch.Tensor:
            n = t.shape[-1] // D  # the role's projections: H, G (grouped) or 1 (shared)
            heads = t.view(B, T, n, D).transpose(1, 2)  # (B, n, T, D)
            return _repeat_heads(heads, H)  # (B, H, T, D): group g serves heads g*H/n .. (g+1)*H/n - 1

        # 1. project: head i gets columns i*D:(i+1)*D of X W^Q (and of X W^K, X W^V); a role with
        #    n < H projections gives head i its group g = i // (H / n), columns g*D:(g+1)*D
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        # 2. scaled dot-product attention in every head at once
        factor = 1.0 / math.sqrt(D) if scale else 1.0
        heads, weights = scaled_dot_product_attention(q, k, v, _key_mask(attention_mask), factor)
        scores = q @ k.transpose(-2, -1)  # (B, H, T, T): the raw scores, for the page
        scaled = scores * factor  # (B, H, T, T)
        # 3. concatenate the heads and project back with W^O
        concat = heads.transpose(1, 2).reshape(B, T, C)  # (B, T, C)
        output = self.out_proj(concat)  # (B, T, C)
        return AttentionTrace(x, q, k, v, scores, scaled, weights, heads, concat, output)
