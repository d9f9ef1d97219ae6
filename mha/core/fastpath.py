"""The primitives of MultiHeadAttention's fast paths (mha/core/attention.py): a view of projections
laid in one block, one affine product on 2-D rows, and scores scaled inside their product. The same
numbers as the step-by-step reference; tests/test_attention.py proves every path equal to it."""

from __future__ import annotations

import torch


def block(parts: list[torch.Tensor | None]) -> torch.Tensor | None:
    """The tensors `parts` (each (rows, ...) and contiguous) as one tensor of all their rows, when
    they lie one after another in one storage (a view, no copy, not tracked by autograd); else None."""
    if any(t is None or not t.is_contiguous() for t in parts):
        return None
    first = parts[0]
    end = first.data_ptr()
    for t in parts:
        if t.data_ptr() != end or t.dtype != first.dtype or t.device != first.device:
            return None
        end += t.numel() * t.element_size()
    if any(t.untyped_storage().data_ptr() != first.untyped_storage().data_ptr() for t in parts):
        return None
    rows = sum(t.shape[0] for t in parts)
    with torch.no_grad():
        return first.as_strided((rows, *first.shape[1:]), first.stride())  # (rows, ...)


SOFTMAX_INTO = torch.ops.aten._softmax.out  # looked up once: torch.ops resolves an op by attribute on each use


def affine(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """(N, C_in) rows -> (N, C_out) x W^T + b, as nn.Linear computes it, in one call on 2-D rows."""
    return x @ weight.t() if bias is None else torch.addmm(bias, x, weight.t())


def scaled_scores(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """(N, Tq, D) queries and (N, Tk, D) keys -> (N, Tq, Tk) scale * q . k, the product scaled by
    itself (baddbmm's alpha), not by another pass over q or the scores."""
    return torch.baddbmm(q.new_empty(()), q, k.transpose(1, 2), beta=0, alpha=scale)
