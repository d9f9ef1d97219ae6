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

from typing import NamedTuple

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


def _mix_plogp(p: np.ndarray, q: np.ndarray, m: np.ndarray, mlogm: np.ndarray) -> np.ndarray:
    """_plogp of m = (p + q) / 2, the same arithmetic written into the buffers m and mlogm (p's shape)."""
    np.add(p, q, out=m)
    m *= 0.5
    np.add(m, _TINY, out=mlogm)
    np.log(mlogm, out=mlogm)
    mlogm *= m
    return mlogm.sum(-1)


class Rows(NamedTuple):
    """Attention rows (..., T) made ready for Jensen-Shannon divergences once: normalised to sum 1
    (float32, as scipy's jensenshannon normalises; all-zero rows, e.g. masked queries, stay 0), their
    sum p log p and which have no weight at all."""

    p: np.ndarray  # (..., T)
    plogp: np.ndarray  # (...)
    empty: np.ndarray  # (...)

    @classmethod
    def of(cls, weights: np.ndarray) -> Rows:
        """The rows of `weights`, normalised, with their p log p."""
        p = _distributions(weights)
        return cls(p, _plogp(p), p.sum(-1) == 0)

    def causal(self, causal: bool) -> Rows:
        """The rows that had a choice (causal_rows): all of them, or a causal map's queries 1..T-1."""
        if not causal or self.p.shape[-2] < 2:
            return self
        return Rows(self.p[..., 1:, :], self.plogp[..., 1:], self.empty[..., 1:])


def js_rows(a: Rows, b: Rows) -> np.ndarray:
    """JS(p, q) = H(m) - (H(p) + H(q)) / 2, m = (p + q) / 2, per row, from the rows' own p log p;
    0 where either row has no weight at all (scipy's nan, counted as 0)."""
    m, mlogm = np.empty_like(a.p), np.empty_like(a.p)
    js = np.maximum(0.5 * (a.plogp + b.plogp) - _mix_plogp(a.p, b.p, m, mlogm), 0.0)  # rounding can go below 0
    return np.where(a.empty | b.empty, 0.0, js)


def js_divergence(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon divergence (nats, in [0, ln 2]) between the rows of p and q (..., T), 0 for
    a row with no weight: equal to scipy's jensenshannon(p, q, axis=-1) ** 2 with its nan as 0,
    within 2e-6 per row in float32 (tests/test_collapse.py)."""
    return js_rows(Rows.of(p), Rows.of(q))


def head_diversity(weights: np.ndarray | Rows) -> np.ndarray:
    """(H, T, T) attention (or its Rows) -> (H, H) Jensen-Shannon divergence (nats, in [0, ln 2])
    between every two heads' attention distributions, averaged over query tokens. 0 = identical heads.

    As js_divergence, with each head's entropy computed once and heads whose rows are the same
    numbers (heads that share their Q and K projections) computed once: their divergence is
    exactly 0, as the long way gives. About 10-20x faster than scipy at 512 tokens
    (bench/bench_collapse.py), equal to it within 1e-6 (tests/test_collapse.py).
    """
    r = weights if isinstance(weights, Rows) else Rows.of(weights)  # (H, T, T)
    H = r.p.shape[0]
    first = _first_equal(r.p)  # (H,): the first head with the same rows
    out = np.zeros((H, H))
    m, mlogm = np.empty_like(r.p[0]), np.empty_like(r.p[0])  # (T, T): one pair at a time
    for a, b in zip(*np.triu_indices(H, 1)):  # each pair once; JS is symmetric and 0 on the diagonal
        fa, fb = first[a], first[b]
        if fa == fb:
            continue  # the same rows: 0
        if (fa, fb) != (a, b):  # the pair of heads they equal, earlier in this order: already done
            out[a, b] = out[min(fa, fb), max(fa, fb)]
            continue
        pair = np.maximum(0.5 * (r.plogp[a] + r.plogp[b]) - _mix_plogp(r.p[a], r.p[b], m, mlogm), 0.0)
        out[a, b] = np.where(r.empty[a] | r.empty[b], 0.0, pair).mean(dtype=np.float64)
    return np.maximum(out, out.T)


def shuffled_diversity(weights: np.ndarray, causal: bool = False, seeds: int = 4, window: int | None = None) -> float:
    """The head diversity (mean JS between heads, as head_diversity) of random maps exactly as sharp
    as `weights` (H, T, T): each row's weights shuffled over the keys it can read (all T; a causal
    row i over 0..i, or its last `window` keys on a sliding layer; the first row left out), the
    mean over `seeds` seeded shuffles. A row keeps
    its weights, so its entropy; only where they fall is random: heads of this sharpness with
    nothing in common. Sharp rows give about ln 2 (1 - 1/T); flat rows give 0, as flat heads do."""
    w = np.asarray(weights, dtype=np.float32)  # (H, T, T)
    out = []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        if causal:
            mixed = np.zeros_like(w)
            for i, lo in enumerate(first_keys(w.shape[-2], window)):
                mixed[:, i, lo : i + 1] = rng.permuted(w[:, i, lo : i + 1], axis=-1)  # (H, i + 1 - lo)
        else:
            mixed = rng.permuted(w, axis=-1)  # (H, T, T): every row on its own
        out.append(mean_off_diagonal(head_diversity(Rows.of(mixed).causal(causal))))
    return float(np.mean(out))


def _first_equal(p: np.ndarray) -> np.ndarray:
    """(H, ...) -> (H,) the index of the first head whose values are the same numbers as each head's."""
    first = np.arange(len(p))
    for h in range(1, len(p)):
        for e in range(h):
            if first[e] == e and np.array_equal(p[h, :1], p[e, :1]) and np.array_equal(p[h], p[e]):
                first[h] = e
                break
    return first


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity along the last axis (0 where a vector is 0)."""
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1) + 1e-12)


def head_spread(weights: np.ndarray) -> float:
    """The largest |difference| between two heads' values, over every pair of heads and every
    entry: attention weights (H, T, T), or any per-head array (H, ...); 0 when every head
    computes the same map (collapse.SAME_WEIGHTS: one map)."""
    w = np.asarray(weights)
    return float((w.max(axis=0) - w.min(axis=0)).max())  # per entry, the two heads furthest apart


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


def random_overlap(d_k: int, d_model: int) -> float:
    """subspace_overlap's value, in expectation, for two uniformly random d_k-dimensional
    subspaces of R^d_model: the mean cos^2 of their principal angles is d_k / d_model (the
    squared Frobenius norm of d_k rows of a random orthogonal matrix's d_k columns, over d_k).
    The floor a measured overlap is read against (tests check it on random Gaussian matrices
    with scipy.linalg.subspace_angles)."""
    return d_k / d_model


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
    kept: list[np.ndarray] = []
    for m in np.asarray(weights):
        if all(_differ(m, k, tolerance) for k in kept):
            kept.append(m)
    return len(kept)


def _differ(a: np.ndarray, b: np.ndarray, tolerance: float, rows: int = 4) -> bool:
    """Whether two (T, T) maps differ by more than `tolerance` in some weight, in float64: the first
    rows first (they settle it for two different heads), then every row (the same heads)."""
    return any(np.abs(a[part].astype(np.float64) - b[part]).max() > tolerance for part in (slice(rows), slice(None)))


def score_spread(scaled: np.ndarray, causal: bool = False, window: int | None = None) -> np.ndarray:
    """(H, T, T) scaled scores q_i . k_j / sqrt(d_k) -> (H,) their spread per head: the standard
    deviation over keys, averaged over queries. Softmax turns a spread near 0 into a flat map
    (every key about 1/T) whatever the order of the scores; a spread of several units lets a
    head put nearly all its weight on one key. causal: query i's spread is over the keys 0..i it
    can read, averaged over the queries 1..T-1 (the first has one key: no spread); window: over its
    last W keys only, on a causal layer with a sliding window of W."""
    s = np.asarray(scaled)
    if not causal:  # float32 stays float32 (numpy's pairwise sums), the mean over queries in float64
        return s.std(-1).mean(-1, dtype=np.float64)
    s = s.astype(np.float64)
    T = s.shape[-1]
    if T < 2:
        return np.zeros(s.shape[0])
    first = first_keys(T, window)
    return np.stack([s[:, i, first[i] : i + 1].std(-1) for i in range(1, T)], -1).mean(-1)


def causal_rows(weights: np.ndarray, causal: bool) -> np.ndarray:
    """(..., T, T) attention -> the rows that had a choice: all of them, or for a causal map the
    queries 1..T-1 (the first can read only itself: weight 1 in every head)."""
    return weights[..., 1:, :] if causal and weights.shape[-2] > 1 else weights


def first_keys(T: int, window: int | None = None) -> np.ndarray:
    """(T,) the first key each causal query reads: 0, or i - W + 1 past a sliding window of W."""
    i = np.arange(T)
    return np.zeros(T, dtype=int) if window is None else np.maximum(0, i - window + 1)


def readable_keys(T: int, causal: bool = False, window: int | None = None) -> np.ndarray:
    """(T,) how many keys each query can read: T; causal, i + 1; with a sliding window of W, at
    most W (query i reads keys first_keys(T, W)[i] .. i)."""
    if not causal:
        return np.full(T, T)
    return np.arange(1, T + 1) - first_keys(T, window)


def entropy_share(weights: np.ndarray, causal: bool = False, window: int | None = None) -> float:
    """The mean entropy of the attention rows (H, T, T) over the most each can have, ln of the
    number of keys it reads (ln T; for a causal row i, ln(i + 1), or ln W past a sliding window
    of W; the first row left out): 1 = even over what it can see, 0 = one key."""
    w = np.asarray(weights)
    w = w if w.dtype.kind == "f" else w.astype(np.float64)  # float32 stays float32: one pass, summed in float64
    T = w.shape[-1]
    if T < 2:
        return 0.0
    ent = -(w * np.log(w + w.dtype.type(_TINY))).sum(-1, dtype=np.float64)  # (H, T); 0 log 0 = 0
    if causal:
        return float((ent[:, 1:] / np.log(np.maximum(readable_keys(T, True, window)[1:], 2))).mean())
    return float(ent.mean() / np.log(T))
