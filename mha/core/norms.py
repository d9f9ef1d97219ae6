"""The per-head query and key norm of 2025's decoders (QK-norm: Dehghani et al. 2023, "Scaling Vision
Transformers to 22 Billion Parameters"; Gemma 3 and Qwen3 have it): an RMS norm over each head's D
dimensions before the scores, so no score can grow with the length of q or k alone."""

from __future__ import annotations

import torch
from torch import nn


class HeadNorm(nn.Module):
    """RMS norm over one head's D dimensions, with weight 1 + w (Gemma's; w = 0 at initialisation),
    computed in float32 as Transformers' Gemma3RMSNorm: x / sqrt(mean(x^2) + eps) * (1 + w). One D-vector
    w serves every head (and every head of a K/V group's key)."""

    def __init__(self, d_head: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(d_head))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., D) -> the same, normalised."""
        f = x.float()
        out = f * torch.rsqrt(f.pow(2).mean(-1, keepdim=True) + self.eps)
        return (out * (1.0 + self.weight.float())).type_as(x)
