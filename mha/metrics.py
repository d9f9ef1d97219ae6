"""Head-vs-head geometry: how different heads' attention is (Jensen-Shannon), how much their
projections' subspaces overlap (principal angles), the effective rank of what they write, and
the cosine between representations. The per-head measures of the atlas live in atlas.py.

References:
- Clark et al. 2019, "What Does BERT Look At?": Jensen-Shannon divergence between heads.
- Björck & Golub 1973: principal angles between subspaces (scipy.linalg.subspace_angles).
- Roy & Vetterli 2007, "The effective rank": exp of the entropy of the normalised singular values;
  `effective_heads` applies it to the heads' outputs, one vector per head, to count how many
  different heads a layer really has.

Shapes: H heads, T tokens, C = d_model, D = C / H.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import svdvals

JS_MAX = float(np.log(2))  # the largest Jensen-Shannon divergence, in nats (two maps with no key in common)
_TINY = np.float32(1e-30)  # log(x + tiny): finite at x = 0, and x log x -> 0 there


def _distributions(weights: np.ndarray) -> np.ndarray:
    """Rows normalised to sum 1, float32 (all-zero rows, e.g. masked queries, stay 0), as scipy's
    jensenshannon normalises."""
    p = np.asarray(weights, dtype=np.float32)
    total = p.sum(-1, keepdims=True)
    return p / np.where(total > 0, total, 1)


def _plogp(p: np.ndarray) -> np.ndarray:
    """sum p log p over the last axis (= -entropy, nats); 0 log 0 = 0."""
    return (p * np.log(p + _TINY)).sum(-1)


def _js(p: np.ndarray, q: np.ndarray, plogp_p: np.ndarray, plogp_q: np.ndarray, empty: np.ndarray) -> np.ndarray:
    """JS(p, q) = H(m) - (H(p) + H(q)) / 2, m = (p + q) / 2, per row, from the rows' own plogp;
    0 where `empty` (a row with no weight at all: scipy's nan, counted as 0)."""
    m = (p + q) * 0.5
    js = np.maximum(0.5 * (plogp_p + plogp_q) - _plogp(m), 0.0)  # rounding can go below 0
    return np.where(empty, 0.0, js)


def js_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon divergence (nats, in [0, ln 2]) between the rows of p and q (..., T), 0 for
    a row with no weight: equal to scipy's jensenshannon(p, q, axis=-1) ** 2 with its nan as 0,
    within 2e-6 per row in float32 (tests/test_collapse.py)."""
    p, q = _distributions(p), _distributions(q)
    return _js(p, q, _plogp(p), _plogp(q), (p.sum(-1) == 0) | (q.sum(-1) == 0))


def head_diversity(weights: np.ndarray) -> np.ndarray:
    """(H, T, T) attention -> (H, H) Jensen-Shannon divergence (nats, in [0, ln 2]) between
    every two heads' attention distributions, averaged over query tokens. 0 = identical heads.

    As js_divergence, with each head's entropy computed once: about 10-20x faster than scipy at
    512 tokens (bench/bench_collapse.py), equal to it within 1e-6 (tests/test_collapse.py).
    """
    p = _distributions(weights)  # (H, T, T)
    H = p.shape[0]
    plogp, empty = _plogp(p), p.sum(-1) == 0  # (H, T) each
    i, j = np.triu_indices(H, 1)  # each pair once; JS is symmetric and 0 on the diagonal
    js = np.empty(len(i))
    for n, (a, b) in enumerate(zip(i, j)):  # one (T, T) pair at a time: no (P, T, T) array
        js[n] = _js(p[a], p[b], plogp[a], plogp[b], empty[a] | empty[b]).mean(dtype=np.float64)
    out = np.zeros((H, H))
    out[i, j] = out[j, i] = js
    return out


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity along the last axis (0 where a vector is 0)."""
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1) + 1e-12)


def head_spread(weights: np.ndarray) -> float:
    """The largest |difference| between any head's values and head 0's: attention weights
    (H, T, T), or any per-head array (H, ...); 0 when every head computes the same map
    (collapse.SAME_WEIGHTS: one map)."""
    w = np.asarray(weights)
    return float(np.abs(w - w[:1]).max())


def mean_off_diagonal(m: np.ndarray) -> float:
    """Mean of an (H, H) matrix without its diagonal (0.0 for H = 1)."""
    H = m.shape[0]
    if H < 2:
        return 0.0
    return float((m.sum() - np.trace(m)) / (H * (H - 1)))


def head_bases(weight: np.ndarray, n_heads: int) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal bases of the column spaces of each head's projection W_i (C x D), batched.

    weight: a projection in nn.Linear layout (H*D, C); head i owns rows i*D:(i+1)*D.
    Returns (bases (H, C, D) with the columns beyond each head's rank zeroed, ranks (H,)): the
    left singular vectors of W_i, from the eigenvectors of its D x D Gram matrix W_i^T W_i =
    V S^2 V^T as W_i V / S (6x faster than the SVD of the C x D matrices). Directions whose
    squared singular value is below max(C, D) * eps of the largest count as rank deficiency (the
    precision of an eigenvalue of the Gram matrix; scipy.linalg.orth, on the singular values
    themselves, can resolve smaller ones).
    """
    w = np.asarray(weight, dtype=np.float64)
    C = w.shape[1]
    D = w.shape[0] // n_heads
    heads = w.reshape(n_heads, D, C).transpose(0, 2, 1)  # (H, C, D): W_i as C x D
    lam, v = np.linalg.eigh(np.swapaxes(heads, 1, 2) @ heads)  # (H, D), (H, D, D): s^2 ascending, V
    keep = lam > lam[:, -1:] * max(C, D) * np.finfo(np.float64).eps  # (H, D)
    scale = np.where(keep, 1.0 / np.sqrt(np.where(keep, lam, 1.0)), 0.0)  # 1 / s, 0 beyond the rank
    return heads @ (v * scale[:, None, :]), keep.sum(-1)


def subspace_overlap(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """(H, H) mean cos^2 of the principal angles between heads' subspaces (1 = the same subspace).

    The cosines of the principal angles between span(A) and span(B) are the singular values of
    A_o^T B_o for orthonormal bases A_o, B_o (as scipy.linalg.subspace_angles computes them; the
    tests check against it), so their squares sum to ||A_o^T B_o||_F^2: no SVD per pair.
    """
    bases, ranks = head_bases(weight, n_heads)  # (H, C, D), (H,)
    H, C, D = bases.shape
    stacked = bases.transpose(1, 0, 2).reshape(C, H * D)  # (C, H*D): every head's basis side by side
    products = (stacked.T @ stacked).reshape(H, D, H, D)  # block (i, j) = A_i^T A_j, in one product
    k = np.minimum(ranks[:, None], ranks[None, :])  # (H, H) number of principal angles
    return np.clip((products**2).sum((1, 3)) / np.maximum(k, 1), 0.0, 1.0)


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


def effective_heads(heads: np.ndarray) -> float:
    """How many different outputs a layer's heads write: the effective rank of its H head outputs, each
    (T, D) output flattened to one vector and scaled to length 1. H copies of one output give 1
    (whatever that output is, sharp or flat); H mutually orthogonal outputs give H. A head with
    uniform attention still counts as its own head when its values differ from the others'.

    heads: (H, T, D) the heads' outputs (weights @ V_i) before concatenation.
    """
    h = np.asarray(heads, dtype=np.float64)
    rows = h.reshape(h.shape[0], -1)  # (H, T*D): one vector per head
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return effective_rank(rows / np.where(norms > 0, norms, 1.0))


def distinct_maps(weights: np.ndarray, tolerance: float = 1e-5) -> int:
    """The number of different attention maps among H heads: a head counts as new when its map
    differs from every earlier new head's by more than `tolerance` in some weight (largest
    absolute difference). weights: (H, T, T)."""
    w = np.asarray(weights, dtype=np.float64)
    kept: list[np.ndarray] = []
    for m in w:
        if all(np.abs(m - k).max() > tolerance for k in kept):
            kept.append(m)
    return len(kept)


def score_spread(scaled: np.ndarray, causal: bool = False) -> np.ndarray:
    """(H, T, T) scaled scores q_i . k_j / sqrt(d_k) -> (H,) their spread per head: the standard
    deviation over keys, averaged over queries. Softmax turns a spread near 0 into a flat map
    (every key about 1/T) whatever the order of the scores; a spread of several units lets a
    head put nearly all its weight on one key. causal: query i's spread is over the keys 0..i it
    can read, averaged over the queries 1..T-1 (the first has one key: no spread)."""
    s = np.asarray(scaled, dtype=np.float64)
    if not causal:
        return s.std(-1).mean(-1)
    T = s.shape[-1]
    if T < 2:
        return np.zeros(s.shape[0])
    return np.stack([s[:, i, : i + 1].std(-1) for i in range(1, T)], -1).mean(-1)


def causal_rows(weights: np.ndarray, causal: bool) -> np.ndarray:
    """(..., T, T) attention -> the rows that had a choice: all of them, or for a causal map the
    queries 1..T-1 (the first can read only itself: weight 1 in every head)."""
    return weights[..., 1:, :] if causal and weights.shape[-2] > 1 else weights


def entropy_share(weights: np.ndarray, causal: bool = False) -> float:
    """The mean entropy of the attention rows (H, T, T) over the most each can have, ln of the
    number of keys it reads (ln T; for a causal row i, ln(i + 1), the first row left out): 1 =
    even over what it can see, 0 = one key."""
    w = np.asarray(weights, dtype=np.float64)
    T = w.shape[-1]
    if T < 2:
        return 0.0
    ent = -(w * np.log(np.where(w > 0, w, 1.0))).sum(-1)  # (H, T)
    if causal:
        return float((ent[:, 1:] / np.log(np.arange(2, T + 1))).mean())
    return float(ent.mean() / np.log(T))
