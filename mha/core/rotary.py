"""Rotary position embeddings (Su et al. 2021, "RoFormer"), as Llama-class decoders use them.

A query or key at position t is rotated, pair of dimensions by pair, by angles t * theta^(-2i/D):
dimension i is paired with dimension i + D/2 (the "rotate half" layout of Hugging Face's Llama).
The dot product of a rotated query at t and a rotated key at s then depends on t - s: positions
enter inside q . k, not added to the token vectors (as BERT's position embeddings are).
"""

from __future__ import annotations

import torch


def angles(T: int, D: int, theta: float, device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin), each (T, D): the rotation of every position 0..T-1 for a head of size D."""
    if D % 2:
        raise ValueError(f"rotary embeddings need an even head size, got {D}")
    inv_freq = 1.0 / theta ** (torch.arange(0, D, 2, dtype=torch.float32, device=device) / D)  # (D/2,)
    freqs = torch.arange(T, dtype=torch.float32, device=device)[:, None] * inv_freq  # (T, D/2)
    emb = torch.cat((freqs, freqs), dim=-1)  # (T, D)
    return emb.cos(), emb.sin()


def rotate(x: torch.Tensor, theta: float) -> torch.Tensor:
    """x (..., T, D) queries or keys at positions 0..T-1 -> the same, rotated."""
    T, D = x.shape[-2:]
    cos, sin = angles(T, D, theta, x.device)  # (T, D) each
    half = torch.cat((-x[..., D // 2 :], x[..., : D // 2]), dim=-1)  # (..., T, D)
    return x * cos.to(x.dtype) + half * sin.to(x.dtype)
