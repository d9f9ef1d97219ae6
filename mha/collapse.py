"""The lesson's check question, on real weights: give every head the same Q/K/V projection.

Everything here builds NEW modules from copies of the weights; the source module (and the
cached BERT it came from) is never modified.

- `shared_module(m, source)`: a projection="shared" module whose one W^Q, W^K, W^V (C x D) is
  head `source`'s slice of m's projections (or the mean of all heads' slices); W^O is kept.
- `interpolate(m, alpha, ...)`: the continuous path W_i(alpha) = (1 - alpha) W_i + alpha W_shared
  for every head i, as a distinct-mode module (alpha = 0: m itself, alpha = 1: all heads equal).
"""

from __future__ import annotations

from typing import Iterable, Literal

import torch

from .attention import MultiHeadAttention

Source = int | Literal["mean"]
ROLES = ("q", "k", "v")


def _head_slices(w: torch.Tensor, H: int) -> torch.Tensor:
    """(C_out, ...) weight or bias of a distinct projection -> (H, D, ...) per-head slices."""
    return w.reshape(H, w.shape[0] // H, *w.shape[1:])  # (H, D, C) or (H, D)


def shared_slice(w: torch.Tensor, H: int, source: Source = 0) -> torch.Tensor:
    """The one slice every head will use: head `source`'s rows, or the mean over heads."""
    slices = _head_slices(w, H)
    if source == "mean":
        return slices.mean(0)
    if not isinstance(source, int) or not 0 <= source < H:
        raise ValueError(f"source must be 'mean' or a head index in 0..{H - 1}, got {source!r}")
    return slices[source]


def _check(m: MultiHeadAttention) -> None:
    if m.projection != "distinct":
        raise ValueError("start from a module with distinct projections")


def shared_module(m: MultiHeadAttention, source: Source = 0) -> MultiHeadAttention:
    """A projection="shared" copy of m: every head uses one W^Q, W^K, W^V (C x D)."""
    _check(m)
    bias = m.q_proj.bias is not None
    with torch.inference_mode(False), torch.no_grad():  # ordinary tensors, no autograd
        s = MultiHeadAttention(m.d_model, m.n_heads, "shared", bias=bias)
        for role in ROLES:
            src, dst = getattr(m, f"{role}_proj"), getattr(s, f"{role}_proj")
            dst.weight.copy_(shared_slice(src.weight, m.n_heads, source))
            if bias:
                dst.bias.copy_(shared_slice(src.bias, m.n_heads, source))
        s.out_proj.load_state_dict(m.out_proj.state_dict())
    return s.eval().requires_grad_(False)


def interpolate(
    m: MultiHeadAttention, alpha: float, source: Source = 0, roles: Iterable[str] = ROLES
) -> MultiHeadAttention:
    """A distinct-mode copy of m with W_i(alpha) = (1 - alpha) W_i + alpha W_shared for `roles`.

    roles: which projections are pulled together ("q", "k", "v"). Sharing only Q and K makes
    every head's attention pattern the same but leaves the values distinct.
    """
    _check(m)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    roles = tuple(roles)
    if bad := [r for r in roles if r not in ROLES]:
        raise ValueError(f"roles must be among {ROLES}, got {bad}")
    H = m.n_heads
    with torch.inference_mode(False), torch.no_grad():  # ordinary tensors, no autograd
        out = MultiHeadAttention(m.d_model, H, "distinct", bias=m.q_proj.bias is not None)
        out.load_state_dict(m.state_dict())
        for role in roles:
            proj = getattr(out, f"{role}_proj")
            for name in ("weight", "bias"):
                w = getattr(proj, name)
                if w is None:
                    continue
                per_head = _head_slices(w, H)  # (H, D, ...)
                target = shared_slice(w, H, source).expand_as(per_head)
                w.copy_(((1 - alpha) * per_head + alpha * target).reshape(w.shape))
    return out.eval().requires_grad_(False)
