"""Each head's representation subspace, made visible: where the tokens land in a head's query
and key space, in a 2-D picture chosen to keep what attention computes from them.

What attention reads of a head's queries Q_i (T, D) and keys K_i (T, D) is the scaled score
matrix S = Q_i K_i^T / sqrt(d_k), and only up to a constant per row: softmax(s + c) = softmax(s).
Translating every key by one vector b adds q_t . b to row t, so the keys can be centred for free
(as AttentionViz translates them). The picture is the best rank-2 factorisation of the centred
scores (Eckart & Young 1936): a query point and a key point have the dot product closest, in the
least-squares sense, to their real scaled score.

fidelity = (s_1^2 + s_2^2) / sum_k s_k^2 over the singular values s_k of the centred scores: the
share of their energy the picture keeps, in (0, 1]; exactly 1 when the head's scores have rank
at most 2.

Shapes: H heads, T tokens, C = d_model, D = d_k = C / H, N tokens of a pool of sentences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np
import torch
from scipy.linalg import orthogonal_procrustes

from mha.analyses import metrics
from mha.analyses.collapse import CollapsePath, module_at
from mha.core.attention import MultiHeadAttention

BERT = CollapsePath(alpha=0.0)  # no pull: the model's own heads

if TYPE_CHECKING:
    from mha.models.family import LoadedModel
    from mha.models.run import Run


@dataclass
class HeadSpaces:
    """Every head's queries and keys for one input, float32: queries, keys (H, T, D)."""

    queries: np.ndarray
    keys: np.ndarray


@dataclass
class HeadMaps:
    """A 2-D picture per head: queries, keys (H, T, 2), fidelity (H,) (see the module doc), the
    head's attention weights (H, T, T) when they were computed with it (else None), the
    spread of its real scaled scores (H,) (metrics.score_spread; near 0, a flat map) when known, and
    how many K projections the heads read (key_groups; heads of one group are drawn on common axes)."""

    queries: np.ndarray
    keys: np.ndarray
    fidelity: np.ndarray
    weights: np.ndarray | None = None
    spread: np.ndarray | None = None
    key_groups: int | None = None  # K projections the heads read (fewer than H: a group's panels share axes)


def head_spaces(module: MultiHeadAttention, x: torch.Tensor | np.ndarray) -> HeadSpaces:
    """Every head's queries and keys for x of shape (T, C) or (1, T, C): the numbers of trace()."""
    return _spaces_and_weights(module, x)[0]


def _spaces_and_weights(module: MultiHeadAttention, x: torch.Tensor | np.ndarray) -> tuple[HeadSpaces, np.ndarray]:
    # a copy of an array: it may be a cached run's, read-only
    x = torch.tensor(x, dtype=torch.float32) if isinstance(x, np.ndarray) else x.float()
    if x.dim() == 2:
        x = x.unsqueeze(0)  # (1, T, C)
    if x.dim() != 3 or x.shape[0] != 1:
        raise ValueError(f"x must have shape (T, C) or (1, T, C), got {tuple(x.shape)}")
    with torch.inference_mode():
        tr = module.trace(x)
    spaces = HeadSpaces(tr.q[0].float().numpy().copy(), tr.k[0].float().numpy().copy())  # (H, T, D) each
    return spaces, tr.weights[0].numpy()


def _rank2(q: np.ndarray, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Best rank-2 factorisation of S = q k^T (q (T, D), k (S, D), k already centred).

    Works on D x D matrices (S has rank at most D): with thin QR q = A R_a and k = B R_b,
    S = A (R_a R_b^T) B^T, so S's singular vectors are A and B times those of R_a R_b^T.
    Returns (query points (T, 2), key points (S, 2), fidelity). Signs are fixed so that each
    axis's largest query coordinate (in absolute value) is positive: equal inputs, equal pictures.
    """
    q, k = q.astype(np.float64), k.astype(np.float64)
    a, r_a = np.linalg.qr(q)  # (T, D'), (D', D)
    b, r_b = np.linalg.qr(k)  # (S, D''), (D'', D)
    u, s, vt = np.linalg.svd(r_a @ r_b.T)  # the small middle factor
    u, v = a @ u[:, :2], b @ vt[:2].T  # (T, 2), (S, 2) singular vectors of S
    s2 = np.zeros(2)
    s2[: min(2, s.size)] = s[:2]
    if u.shape[1] < 2:  # fewer than two directions (one token or d_k = 1)
        u = np.pad(u, ((0, 0), (0, 2 - u.shape[1])))
        v = np.pad(v, ((0, 0), (0, 2 - v.shape[1])))
    flip = np.sign(u[np.abs(u).argmax(0), [0, 1]])  # (2,): the same flip on u and v keeps S
    flip[flip == 0] = 1.0
    root = np.sqrt(s2) * flip
    energy = float((s**2).sum())
    fidelity = float((s2**2).sum() / energy) if energy > 0 else 1.0
    return (u * root).astype(np.float32), (v * root).astype(np.float32), fidelity


def head_maps(
    spaces: HeadSpaces,
    weights: np.ndarray | None = None,
    causal: bool = False,
    key_groups: int | None = None,
    window: int | None = None,
) -> HeadMaps:
    """The 2-D picture of every head (see the module doc); weights are passed through. With
    `causal`, the fidelity counts only the pairs a causal softmax uses (a query and the keys up to
    it: within_fidelity); the picture is still the best fit to every pair. key_groups: how many K
    projections the heads read (fewer than H: consecutive heads share one, as in grouped- or
    multi-query attention): the heads of one group are drawn on common axes, the best rank-2 fit of
    their stacked scores, so their shared keys sit at the same points in every panel of the group;
    each head's fidelity is then the share of its own scores that common picture keeps."""
    H, T, D = spaces.queries.shape
    scale = 1.0 / math.sqrt(D)
    G = H if key_groups is None else key_groups
    qs, ks, fid = np.empty((H, T, 2), np.float32), np.empty((H, T, 2), np.float32), np.empty(H)
    for g in range(G):
        heads = range(g * (H // G), (g + 1) * (H // G))
        keys = spaces.keys[heads[0]] - spaces.keys[heads[0]].mean(0)  # free for the softmax: one shift per row
        stacked = np.concatenate([spaces.queries[h] * scale for h in heads])  # (m T, D): the group's queries
        q2, k2, fidelity = _rank2(stacked, keys)
        for n, h in enumerate(heads):
            qs[h], ks[h] = q2[n * T : (n + 1) * T], k2
            fid[h] = fidelity
            if causal or len(heads) > 1:  # the share of this head's own (causal) pairs the picture keeps
                q = spaces.queries[h] * scale
                fid[h] = within_fidelity(q, keys, qs[h], ks[h], np.zeros(T), causal=causal)
    scaled = (spaces.queries * scale) @ spaces.keys.transpose(0, 2, 1)  # (H, T, T)
    return HeadMaps(qs, ks, fid, weights, metrics.score_spread(scaled, causal, window), G)


def layer_maps(bert: LoadedModel, run: Run, layer: int, path: CollapsePath = BERT) -> HeadMaps:
    """head_maps of BERT's layer `layer` on the run's input to it, at a point of the path to shared
    projections exactly as the collapse page has it (on a copy of the weights; default: alpha = 0,
    the model's own heads)."""
    m = module_at(bert.scratch_layer(layer), path)
    spaces, weights = _spaces_and_weights(m, run.layer_input(layer)[0].numpy())  # (T, C): what the attention reads
    return head_maps(spaces, weights, m.causal, m.role_heads[1], m.window)


def align(points: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """The rotation or reflection R (2, 2) that brings `points` (n, 2) closest to `previous`
    (n, 2) (orthogonal Procrustes, scipy.linalg.orthogonal_procrustes). Applied to the queries
    and the keys of one picture, it keeps every query . key dot product."""
    return orthogonal_procrustes(points.astype(np.float64), previous.astype(np.float64))[0]


def aligned_frames(frames: list[HeadMaps]) -> list[HeadMaps]:
    """Each frame's pictures turned (per head, or per group of heads drawn on common axes) to match
    the next frame: every frame has its own SVD basis and sign rule, so an axis swap or flip between
    frames would look like movement; after alignment only real change moves a point. The last frame
    is kept as it is (at alpha = 1 with Q and K shared, its panels are one picture), and the others
    follow it backwards. A group of heads is turned as one, so its shared keys stay common."""
    out = [frames[-1]]
    for maps in frames[-2::-1]:
        nxt = out[-1]
        qs, ks = maps.queries.copy(), maps.keys.copy()
        H = qs.shape[0]
        G = H if maps.key_groups is None else maps.key_groups
        for g in range(G):
            heads = list(range(g * (H // G), (g + 1) * (H // G)))
            r = align(np.concatenate([*qs[heads], *ks[heads]]), np.concatenate([*nxt.queries[heads], *nxt.keys[heads]]))
            qs[heads], ks[heads] = qs[heads] @ r, ks[heads] @ r
        out.append(replace(maps, queries=qs, keys=ks))
    return out[::-1]


def alpha_frames(
    bert: LoadedModel, run: Run, layer: int, path: CollapsePath, steps: int = 11
) -> list[tuple[float, HeadMaps]]:
    """layer_maps at `steps` evenly spaced alphas from 0 (distinct) to 1 (shared) on the path's
    source and roles, without the attention weights (the frames of an animation need only the
    points), each frame aligned to the next (aligned_frames)."""
    alphas = [float(a) for a in np.linspace(0.0, 1.0, steps)]
    frames = [replace(layer_maps(bert, run, layer, path.at(a)), weights=None) for a in alphas]
    return list(zip(alphas, aligned_frames(frames)))


def longest_point(maps: HeadMaps, heads: list[int] | None = None) -> float:
    """The length of the longest query or key point (distance from 0) in the pictures of `heads` (None:
    all): the scale a difference between pictures is said against."""
    pick = slice(None) if heads is None else heads
    pts = np.concatenate([maps.queries[pick].reshape(-1, 2), maps.keys[pick].reshape(-1, 2)])
    return float(np.linalg.norm(pts, axis=1).max())


def max_map_difference(maps: HeadMaps) -> float:
    """The largest |difference| between two heads' pictures, any two (0 = identical panels)."""
    return float(max(np.ptp(maps.queries, axis=0).max(), np.ptp(maps.keys, axis=0).max()))


# ---------------------------------------------------------------- the weight-space view


@dataclass
class WeightSpectra:
    """Singular values of the projections of one layer.

    per_head: (H, D) of W_i^Q W_i^K^T (C x C, rank at most D): how many directions each head's
        query-key match really uses.
    query, key: (C,) of the heads' stacked W^Q and W^K (C x C): if the heads used unrelated
        subspaces, H heads of rank D would fill all C directions evenly; a fast decay means they
        share common directions (Cordonnier et al. 2020, "Multi-Head Attention: Collaborate
        Instead of Concatenate").
    """

    per_head: np.ndarray
    query: np.ndarray
    key: np.ndarray
    reference: np.ndarray  # (C,) of a C x C Gaussian matrix: unrelated directions, for comparison
    query_rotated: np.ndarray | None = None  # (C,): the stack with each head's own spectrum, random directions
    key_rotated: np.ndarray | None = None

    def energy_rank(self, which: str = "query", share: float = 0.9) -> int:
        """How many directions hold `share` of the squared singular values of `which`
        ("query", "key", "reference", "query_rotated" or "key_rotated")."""
        s2 = getattr(self, which).astype(np.float64) ** 2
        return int(np.searchsorted(np.cumsum(s2) / s2.sum(), share) + 1)


def weight_spectra(module: MultiHeadAttention) -> WeightSpectra:
    """The singular values of a module's query and key projections (see WeightSpectra): every head
    its own W^Q, and its own W^K, its group's (grouped-query attention) or the one all heads read
    (multi-query). With a per-head query/key norm its weights (1 + w, a D x D diagonal) sit between
    the projection and the score and are counted in: diag(1 + w_q) W_i^Q and diag(1 + w_k) W^K (each
    token's RMS then scales its scores as a whole, which no spectrum shows)."""
    H, D = module.n_heads, module.d_head
    _, G, _ = module.role_heads
    if module.role_heads[0] != H:
        raise ValueError("weight spectra need a W^Q per head (not shared)")
    wq = module.q_proj.weight.detach().double().numpy()  # (H*D, C): head i owns rows i*D:(i+1)*D
    wk = module.k_proj.weight.detach().double().numpy()  # (G*D, C): group g owns rows g*D:(g+1)*D
    if module.qk_norm is not None:  # the norms' diagonal, the same for every head: (D,) tiled over the rows
        wq = wq * np.tile(1.0 + module.q_norm.weight.detach().double().numpy(), H)[:, None]
        wk = wk * np.tile(1.0 + module.k_norm.weight.detach().double().numpy(), G)[:, None]
    per_head = np.empty((H, D))
    for h in range(H):
        g = h // (H // G)  # the K projection head h reads
        a, b = wq[h * D : (h + 1) * D].T, wk[g * D : (g + 1) * D].T  # (C, D): W_i^Q, W_g^K
        _, r_a = np.linalg.qr(a)
        _, r_b = np.linalg.qr(b)
        per_head[h] = np.linalg.svd(r_a @ r_b.T, compute_uv=False)  # those of W_i^Q W_i^K^T
    rng = np.random.default_rng(0)
    reference = np.linalg.svd(rng.standard_normal(wq.shape), compute_uv=False)
    return WeightSpectra(
        per_head,
        np.linalg.svd(wq, compute_uv=False),
        np.linalg.svd(wk, compute_uv=False),
        reference,
        rotated_stack(wq, H, rng),
        rotated_stack(wk, G, rng),
    )


def rotated_stack(w: np.ndarray, n_heads: int, rng: np.random.Generator) -> np.ndarray:
    """The singular values of the heads' stacked slices (w: (H*D, C)) if each head kept its own
    singular values but pointed them in random directions: the baseline that tells shared
    directions from uneven spectra (a stack of uneven spectra decays fast even when unrelated)."""
    D, C = w.shape[0] // n_heads, w.shape[1]
    rows = []
    for h in range(n_heads):
        s = np.linalg.svd(w[h * D : (h + 1) * D], compute_uv=False)  # (D,)
        v, _ = np.linalg.qr(rng.standard_normal((C, D)))  # (C, D): D random orthonormal directions
        rows.append(s[:, None] * v.T)  # (D, C)
    return np.linalg.svd(np.vstack(rows), compute_uv=False)


# ---------------------------------------------------------------- many sentences


def pool_sentences() -> list[str]:
    """The ~50 short sentences bundled for the pooled picture (written for this project)."""
    text = resources.files("mha").joinpath("data/pool_sentences.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def pool_runs(model: LoadedModel) -> list[Run]:
    """The bundled pool of sentences through the model."""
    return [model.attend(text) for text in pool_sentences()]


@dataclass
class Pool:
    """Queries and keys of every token of many sentences, for one layer, per head.

    queries, keys: (H, N, D); keys are centred per sentence (free for each sentence's softmax).
    tokens: N token strings; sentence: (N,) which sentence each came from; position: (N,) the
    token's position in its sentence divided by the sentence's length (0 = its first token);
    causal: whether a query reads only the keys up to it (a decoder).
    """

    queries: np.ndarray
    keys: np.ndarray
    tokens: list[str]
    sentence: np.ndarray
    position: np.ndarray
    causal: bool = False


def pool_spaces(bert: LoadedModel, runs: list[Run], layer: int) -> Pool:
    """Every token of `runs` at BERT's layer `layer` (real weights), pooled."""
    m = bert.scratch_layer(layer)
    qs, ks, tokens, sentence, position = [], [], [], [], []
    for n, run in enumerate(runs):
        sp = head_spaces(m, run.layer_input(layer)[0].numpy())  # (T, C)
        qs.append(sp.queries)
        ks.append(sp.keys - sp.keys.mean(1, keepdims=True))
        tokens += run.tokens
        sentence += [n] * run.n_tokens
        position += list(np.arange(run.n_tokens) / max(run.n_tokens - 1, 1))
    return Pool(np.concatenate(qs, 1), np.concatenate(ks, 1), tokens, np.array(sentence), np.array(position), m.causal)


def pool_maps(p: Pool) -> HeadMaps:
    """The 2-D picture of each head over the whole pool (the same rank-2 method, fitted to every
    query-key pair of the pool). Its `fidelity` is the share of the energy of the within-sentence
    scores that the picture keeps (within_fidelity): only those pairs meet in a softmax."""
    H, N, D = p.queries.shape
    scale = 1.0 / math.sqrt(D)
    qs, ks, fid = np.empty((H, N, 2), np.float32), np.empty((H, N, 2), np.float32), np.empty(H)
    for h in range(H):
        qs[h], ks[h], _ = _rank2(p.queries[h] * scale, p.keys[h])
        fid[h] = within_fidelity(p.queries[h] * scale, p.keys[h], qs[h], ks[h], p.sentence, p.causal)
    return HeadMaps(qs, ks, fid)


def within_fidelity(
    q: np.ndarray, k: np.ndarray, q2: np.ndarray, k2: np.ndarray, sentence: np.ndarray, causal: bool = False
) -> float:
    """1 - sum_n ||S_n - P_n||^2 / sum_n ||S_n||^2 over the sentences n of a pool: S_n = q_n k_n^T
    are the scores within sentence n (q (N, D), k (N, D), scaled and centred), P_n = q2_n k2_n^T
    the picture's dot products (q2, k2 (N, 2)). Pairs of tokens from different sentences, which no
    softmax compares, do not count. For one sentence it equals the fidelity of its own picture
    when the picture is that sentence's best rank-2 fit. With `causal`, only the pairs of a query
    and a key at or before it count (what a causal softmax compares)."""
    residual = energy = 0.0
    for n in np.unique(sentence):
        i = sentence == n
        s = q[i].astype(np.float64) @ k[i].astype(np.float64).T  # (T_n, T_n)
        used = np.tril(np.ones_like(s, dtype=bool)) if causal else np.ones_like(s, dtype=bool)  # (T_n, T_n)
        residual += float((((s - q2[i].astype(np.float64) @ k2[i].astype(np.float64).T) ** 2) * used).sum())
        energy += float(((s**2) * used).sum())
    return 1.0 - residual / energy if energy > 0 else 1.0


def token_kinds(tokens: list[str], position: np.ndarray | None = None) -> list[str]:
    """'special' ([CLS], [SEP], [PAD], or with `position` (N,) a decoder's first tokens, where it is
    0), 'punctuation' (no letter or digit) or 'word', per token."""
    from mha.analyses.map_views import SPECIAL

    out = []
    for n, t in enumerate(tokens):
        bare = t.removeprefix("##")
        if t in SPECIAL or (position is not None and position[n] == 0):
            out.append("special")
        elif bare and not any(c.isalnum() for c in bare):
            out.append("punctuation")
        else:
            out.append("word")
    return out
