"""Measures of attention heads: how different they are, and what space they work in.

References:
- Clark et al. 2019, "What Does BERT Look At?": Jensen-Shannon divergence between heads.
- Björck & Golub 1973: principal angles between subspaces (scipy.linalg.subspace_angles).
- Roy & Vetterli 2007, "The effective rank": exp of the entropy of the normalised singular values.

Shapes: H heads, T tokens, C = d_model, D = C / H.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import orth, svdvals
from scipy.spatial.distance import jensenshannon


def head_diversity(weights: np.ndarray) -> np.ndarray:
    """(H, T, T) attention -> (H, H) Jensen-Shannon divergence (nats, in [0, ln 2]) between
    every two heads' attention distributions, averaged over query tokens. 0 = identical heads.
    """
    w = np.asarray(weights, dtype=np.float32)
    H = w.shape[0]
    i, j = np.triu_indices(H, 1)  # each pair once; JS is symmetric and 0 on the diagonal
    dist = jensenshannon(w[i], w[j], axis=-1)  # (P, T) distance = sqrt(divergence), nats
    out = np.zeros((H, H))
    out[i, j] = out[j, i] = np.nan_to_num(dist.astype(np.float64), nan=0.0).__pow__(2).mean(-1)
    return out


def mean_off_diagonal(m: np.ndarray) -> float:
    """Mean of an (H, H) matrix without its diagonal (0.0 for H = 1)."""
    H = m.shape[0]
    if H < 2:
        return 0.0
    return float((m.sum() - np.trace(m)) / (H * (H - 1)))


def head_bases(weight: np.ndarray, n_heads: int) -> list[np.ndarray]:
    """Orthonormal bases (C, r) of the column spaces of each head's projection W_i (C x D).

    weight: a projection in nn.Linear layout (H*D, C); head i owns rows i*D:(i+1)*D.
    """
    w = np.asarray(weight, dtype=np.float64)
    D = w.shape[0] // n_heads
    return [orth(w[i * D:(i + 1) * D].T) for i in range(n_heads)]  # each (C, r <= D)


def subspace_overlap(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """(H, H) mean cos^2 of the principal angles between heads' subspaces (1 = the same subspace).

    cos of the principal angles between span(A) and span(B) are the singular values of
    A_o^T B_o for orthonormal bases A_o, B_o (what scipy.linalg.subspace_angles computes).
    """
    bases = head_bases(weight, n_heads)
    out = np.eye(n_heads)
    for i in range(n_heads):
        for j in range(i + 1, n_heads):
            cos = np.clip(svdvals(bases[i].T @ bases[j]), 0.0, 1.0)
            k = min(bases[i].shape[1], bases[j].shape[1])
            out[i, j] = out[j, i] = float(np.mean(cos[:k] ** 2))
    return out


def effective_rank(matrix: np.ndarray) -> float:
    """exp(entropy of the singular values normalised to sum 1): between 1 and rank(matrix)."""
    m = np.asarray(matrix, dtype=np.float64)
    s = svdvals(m)
    # singular values below float32 round-off of the largest are numerical noise, not directions
    s = s[s > s.max() * max(m.shape) * np.finfo(np.float32).eps] if s.size and s.max() > 0 else s[:0]
    if s.size == 0:
        return 0.0
    p = s / s.sum()
    return float(np.exp(-(p * np.log(p)).sum()))
