"""Measures of attention heads: how different they are, and what space they work in.

References:
- Clark et al. 2019, "What Does BERT Look At?": Jensen-Shannon divergence between heads.
- Björck & Golub 1973: principal angles between subspaces (scipy.linalg.subspace_angles).
- Roy & Vetterli 2007, "The effective rank": exp of the entropy of the normalised singular values.

Shapes: H heads, T tokens, C = d_model, D = C / H.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.linalg import svdvals

_TINY = np.float32(1e-30)  # log(x + tiny): finite at x = 0, and x log x -> 0 there


def head_diversity(weights: np.ndarray) -> np.ndarray:
    """(H, T, T) attention -> (H, H) Jensen-Shannon divergence (nats, in [0, ln 2]) between
    every two heads' attention distributions, averaged over query tokens. 0 = identical heads.

    Rows are normalised to sum 1 (all-zero rows, e.g. masked queries, count as 0), as scipy's
    jensenshannon does; computed as JS(p, q) = H(m) - (H(p) + H(q)) / 2 with m = (p + q) / 2, so
    each head's entropy is computed once: about 20x faster than scipy at 512 tokens
    (bench/bench_collapse.py), equal to it within 1e-6 (tests/test_collapse.py, real attention).
    """
    p = np.asarray(weights, dtype=np.float32)
    total = p.sum(-1, keepdims=True)  # (H, T, 1)
    p = p / np.where(total > 0, total, 1)
    H = p.shape[0]
    plogp = (p * np.log(p + _TINY)).sum(-1)  # (H, T) = -entropy; 0 log 0 = 0
    i, j = np.triu_indices(H, 1)  # each pair once; JS is symmetric and 0 on the diagonal
    js = np.empty(len(i))
    for n, (a, b) in enumerate(zip(i, j)):  # one (T, T) pair at a time: no (P, T, T) array
        m = (p[a] + p[b]) * 0.5  # (T, T)
        per_query = 0.5 * (plogp[a] + plogp[b]) - (m * np.log(m + _TINY)).sum(-1)  # (T,)
        js[n] = np.maximum(per_query, 0.0).mean(dtype=np.float64)  # rounding can go below 0
    out = np.zeros((H, H))
    out[i, j] = out[j, i] = js
    return out


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


# ---------------------------------------------------------------- per-head measures (head atlas)
# Shapes: attentions (L, H, T, T), row i = query token i, column j = key token j.

PATTERN_THRESHOLDS = {  # the app's own rule of thumb after Kovaleva et al. 2019's five classes
    "vertical": 0.5,  # share of attention to [CLS]/[SEP]
    "diagonal": 0.5,  # share to the previous + next token
    "vertical+diagonal": 0.6,  # both together, each at least `mixed_min`
    "mixed_min": 0.2,
    "block": 0.8,  # share that stays inside the query's own sentence (pairs only)
}
POSITIONAL_MIN = 0.9  # a head is positional if >= 90% of queries have the same argmax offset


PUNCTUATION = (".", ",")  # what Clark et al. 2019 count as punctuation (their code: "." or ",")


def _mean_share(att: np.ndarray, key_mask: np.ndarray) -> np.ndarray:
    """Mean over queries of the weight on the keys in key_mask (T,) -> (L, H)."""
    return att[..., key_mask].sum(-1).mean(-1)


def offset_share(att: np.ndarray, offset: int) -> np.ndarray:
    """Mean over queries i of the weight on key j = i + offset -> (L, H).

    offset = -1 is the previous token, +1 the next token, 0 the token itself. Queries with no
    such key (the first token for -1, the last for +1) count as 0.
    """
    T = att.shape[-1]
    diag = np.diagonal(att, offset=offset, axis1=-2, axis2=-1)  # (L, H, T - |offset|)
    return diag.sum(-1) / T


def entropy(att: np.ndarray) -> np.ndarray:
    """Mean over queries of the entropy of each attention row, in nats -> (L, H).

    0 = every query attends to one key; ln T = uniform attention (the upper bound).
    """
    p = np.clip(att, 1e-12, 1.0)
    return -(att * np.log(p)).sum(-1).mean(-1)


def confidence(att: np.ndarray) -> np.ndarray:
    """Mean over queries of the largest weight (Voita et al. 2019) -> (L, H), in [1/T, 1]."""
    return att.max(-1).mean(-1)


def positional(att: np.ndarray, min_share: float = POSITIONAL_MIN) -> tuple[np.ndarray, np.ndarray]:
    """Positional heads: the argmax key sits at the same offset j - i for >= min_share of queries.

    Returns (flag (L, H) bool, most common offset (L, H) int).
    """
    T = att.shape[-1]
    L, H = att.shape[:2]
    offsets = att.argmax(-1) - np.arange(T) + T  # (L, H, T) argmax offset, shifted to >= 0
    counts = np.stack([np.bincount(row, minlength=2 * T) for row in offsets.reshape(L * H, T)])
    counts = counts.reshape(L, H, 2 * T)  # (L, H, 2T) how many queries have each offset
    return counts.max(-1) / T >= min_share, counts.argmax(-1) - T


def head_measures(
    attentions: np.ndarray, tokens: list[str], segment_ids: list[int] | None = None
) -> dict[str, np.ndarray]:
    """Every per-head measure, each (L, H), in one dict (Clark et al. 2019; Voita et al. 2019).

    Shares follow Clark et al. 2019's code: the mean over queries of the weight on [CLS], on
    [SEP], on the tokens "." and "," ("to punctuation"), on the query itself, on the previous
    and on the next token. "entropy / ln T" is the entropy over its maximum for the length, so
    that sentences of different lengths compare (in [0, 1]).
    """
    att = np.asarray(attentions, dtype=np.float32)
    toks = np.array(tokens)
    out = {
        "to [CLS]": _mean_share(att, toks == "[CLS]"),
        "to [SEP]": _mean_share(att, toks == "[SEP]"),
        "to punctuation": _mean_share(att, np.isin(toks, PUNCTUATION)),
        "to itself": offset_share(att, 0),
        "to previous": offset_share(att, -1),
        "to next": offset_share(att, 1),
        "entropy": entropy(att),
        "entropy / ln T": entropy(att) / np.log(max(att.shape[-1], 2)),
        "confidence": confidence(att),
    }
    flag, offset = positional(att)
    out["positional"] = flag
    out["argmax offset"] = offset
    if segment_ids is not None and 1 in segment_ids:
        seg = np.asarray(segment_ids)
        same = seg[:, None] == seg[None, :]  # (T, T) query and key in the same sentence
        out["within sentence"] = (att * same).sum(-1).mean(-1)
    return out


def pattern_labels(m: dict[str, np.ndarray], n_tokens: int, th: dict[str, float] = PATTERN_THRESHOLDS) -> np.ndarray:
    """A Kovaleva et al. 2019-style pattern per head from its measures -> (L, H) str.

    vertical (to [CLS]/[SEP]), diagonal (to the previous/next token), vertical+diagonal,
    block (stays within its sentence of a pair), heterogeneous (none of these). A share only
    counts if it is also at least twice what uniform attention over n_tokens would give, so
    that short inputs are not all labelled by chance.
    """
    uniform = 2.0 / max(n_tokens, 1)  # the share of two keys under uniform attention
    vertical = m["to [CLS]"] + m["to [SEP]"]
    diagonal = m["to previous"] + m["to next"]

    def strong(share: np.ndarray, threshold: float) -> np.ndarray:
        return (share >= threshold) & (share >= 2 * uniform)

    labels = np.full(vertical.shape, "heterogeneous", dtype=object)
    block = m.get("within sentence")
    if block is not None:
        labels[block >= th["block"]] = "block"
    mixed = (
        (vertical + diagonal >= th["vertical+diagonal"])
        & strong(vertical, th["mixed_min"])
        & strong(diagonal, th["mixed_min"])
    )
    labels[mixed] = "vertical+diagonal"
    labels[strong(diagonal, th["diagonal"])] = "diagonal"
    labels[strong(vertical, th["vertical"])] = "vertical"
    return labels


def rollout(attentions: np.ndarray) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020): A_l' = rownorm(0.5 mean_h(A_l) + 0.5 I),
    R_0 = A_0', R_l = A_l' R_(l-1). Returns (L, T, T): R_l, how much each token at layer l
    draws on each input token. Rows sum to 1.
    """
    att = np.asarray(attentions, dtype=np.float64)
    T = att.shape[-1]
    out = np.empty((att.shape[0], T, T))
    R = np.eye(T)
    for l in range(att.shape[0]):
        a = 0.5 * att[l].mean(0) + 0.5 * np.eye(T)
        a /= a.sum(-1, keepdims=True)
        R = a @ R
        out[l] = R
    return out


def link_ranking(attentions: np.ndarray, query: int, key: int, both_ways: bool = False) -> list[tuple[int, int, float]]:
    """All heads ranked by the weight from token `query` to token `key` (or the larger of the
    two directions): [(layer, head, weight), ...], strongest first."""
    w = attentions[:, :, query, key]
    if both_ways:
        w = np.maximum(w, attentions[:, :, key, query])
    order = np.argsort(w, axis=None)[::-1]
    L, H = w.shape
    return [(int(i // H), int(i % H), float(w.flat[i])) for i in order]


MOSTLY = 0.5  # a head "attends mostly to" something only with at least half of its weight there
NEAR_UNIFORM = 0.9  # entropy at least this share of ln T: "close to uniform"


def describe(m: dict[str, np.ndarray], label: str, layer: int, head: int, n_tokens: int) -> str:
    """One line on what a head does, from its measures: "mostly" only where a share is at least
    MOSTLY, "close to uniform" only where the entropy is at least NEAR_UNIFORM of ln T."""
    pick = {k: float(v[layer, head]) for k, v in m.items() if k.startswith("to ") or k in ("entropy", "confidence")}
    shares = {k: v for k, v in pick.items() if k.startswith("to ")}
    top, share = max(shares.items(), key=lambda kv: kv[1])
    where = {
        "to [CLS]": "the [CLS] token",
        "to [SEP]": "the [SEP] token",
        "to punctuation": '"." and ","',
        "to itself": "itself",
        "to previous": "the previous token",
        "to next": "the next token",
    }[top]
    most = float(np.log(max(n_tokens, 2)))
    if share >= MOSTLY:
        text = f"Layer {layer}, head {head} ({label}): attends mostly to {where} ({share:.0%})"
    else:
        spread = (
            "spreads its attention close to uniformly"
            if pick["entropy"] >= NEAR_UNIFORM * most
            else "spreads its attention"
        )
        text = f"Layer {layer}, head {head} ({label}): {spread}; its largest share goes to {where} ({share:.0%})"
    if bool(m["positional"][layer, head]):
        text += f"; positional (offset {int(m['argmax offset'][layer, head]):+d})"
    return (
        text
        + f"; entropy {pick['entropy']:.2f} of at most ln T = {most:.2f} nats, confidence {pick['confidence']:.2f}."
    )


def _contributions(module, tr) -> torch.Tensor:
    """f_h(x_j) = (x_j W_h^V + b_h^V) W_h^O for every head h and key j -> (H, T, C), where
    W_h^O is the head's D columns of W^O: what key j adds to a query's output through head h."""
    H, D = module.n_heads, module.d_head
    w_o = module.out_proj.weight.reshape(module.d_model, H, D).permute(1, 2, 0)  # (H, D, C)
    return tr.v[0] @ w_o  # (H, T, C)


def value_weighted(module, x) -> np.ndarray:
    """||alpha^h_ij f_h(x_j)|| for every head h, query i and key j -> (H, T, T).

    The per-head form of Kobayashi et al. 2020's measure: weighting attention by the norm of
    what each key contributes tempers raw weights on keys that add little (often [CLS], [SEP],
    punctuation). module: a distinct-mode mha.MultiHeadAttention; x: (1, T, C) torch tensor.
    """
    with torch.inference_mode():
        tr = module.trace(x)
        norms = _contributions(module, tr).norm(dim=-1)  # (H, T)
        return (tr.weights[0] * norms[:, None, :]).numpy()  # (H, T, T)


def value_weighted_row(module, x, query: int) -> np.ndarray:
    """||sum_h alpha^h_(query,j) f_h(x_j)|| for every key j -> (T,): Kobayashi et al. 2020's
    norm for a whole layer (the norm of the sum over heads, not a sum or mean of norms)."""
    with torch.inference_mode():
        tr = module.trace(x)
        f = _contributions(module, tr)  # (H, T, C)
        summed = (tr.weights[0, :, query, :, None] * f).sum(0)  # (T, C): sum over heads
        return summed.norm(dim=-1).numpy()
