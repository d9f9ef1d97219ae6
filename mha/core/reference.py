"""Copy a from-scratch MultiHeadAttention into PyTorch's nn.MultiheadAttention (the reference)."""

from __future__ import annotations

import torch
from torch import nn

from mha.core.attention import MultiHeadAttention


def to_torch_mha(m: MultiHeadAttention) -> nn.MultiheadAttention:
    """An nn.MultiheadAttention(batch_first=True) with the same weights (distinct mode only)."""
    if m.role_heads != (m.n_heads,) * 3:
        raise ValueError("nn.MultiheadAttention has no shared or grouped mode; use distinct projections")
    if m.causal or m.rope_theta is not None:
        raise ValueError("nn.MultiheadAttention has no causal or rotary structure (a mask is passed per call)")
    bias = m.q_proj.bias is not None
    ref = nn.MultiheadAttention(m.d_model, m.n_heads, bias=bias, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([m.q_proj.weight, m.k_proj.weight, m.v_proj.weight]))
        ref.out_proj.weight.copy_(m.out_proj.weight)
        if bias:
            ref.in_proj_bias.copy_(torch.cat([m.q_proj.bias, m.k_proj.bias, m.v_proj.bias]))
            ref.out_proj.bias.copy_(m.out_proj.bias)
    return ref
