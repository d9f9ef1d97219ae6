"""The head atlas: what each head does on a run, from the literature's per-head measures (shares
of attention to [CLS], [SEP], punctuation, itself, its neighbours; entropy; confidence; a
positional flag; a Kovaleva-style pattern label), the heads that link two tokens, rollout and
value-weighted attention for one token, two sentences compared, the measures as CSV.

References: Clark et al. 2019, "What Does BERT Look At?"; Voita et al. 2019; Kovaleva et al.
2019, "Revealing the Dark Secrets of BERT"; Abnar & Zuidema 2020 (rollout); Kobayashi et al.
2020 (attention weighted by the norm of what each key adds).
Shapes: attentions (L, H, T, T), row i = query token i, column j = key token j.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from mha.analyses import metrics

if TYPE_CHECKING:
    from mha.models.family import LoadedModel
    from mha.models.run import Run

# ---------------------------------------------------------------- per-head measures

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
    """Mean over the queries i that have a key j = i + offset of the weight on it -> (L, H).

    offset = -1 is the previous token, +1 the next token, 0 the token itself. A query with no
    such key (the first token for -1, the last for +1) is left out, not counted as 0: a head that
    puts all of every other query's weight on the previous token reads 1.
    """
    T = att.shape[-1]
    if abs(offset) >= T:
        return np.zeros(att.shape[:-2])
    diag = np.diagonal(att, offset=offset, axis1=-2, axis2=-1)  # (L, H, T - |offset|)
    return diag.mean(-1)


def uniform_entropy(n_tokens: int) -> float:
    """ln T: the entropy of a row spread evenly over T keys, the largest a row can have (nats)."""
    return float(np.log(n_tokens))


def entropy(att: np.ndarray) -> np.ndarray:
    """Mean over queries of the entropy of each attention row, in nats -> (L, H).

    0 = every query attends to one key; ln T = uniform attention (the upper bound).
    """
    return row_entropy(att).mean(-1)


def row_entropy(att: np.ndarray) -> np.ndarray:
    """The entropy of every attention row, in nats -> att.shape[:-1]: -sum_j p_j ln p_j (weights
    below 1e-12 count as 1e-12 inside the log), one layer at a time: (L, H, T, T) input needs one
    (H, T, T) buffer, not a second copy of the whole array."""
    out = np.empty(att.shape[:-1], dtype=np.float32)
    for l in range(att.shape[0]):
        p = np.maximum(att[l], 1e-12)  # (H, T, T) a copy, overwritten in place below
        np.log(p, out=p)
        p *= att[l]
        out[l] = -p.sum(-1)
    return out


def confidence(att: np.ndarray, keys: np.ndarray | None = None) -> np.ndarray:
    """Mean over queries of the largest weight on the keys where `keys` (T,) is True -> (L, H), in
    [0, 1]. Voita et al. 2019 leave out the end-of-sentence token, where heads park attention;
    head_measures leaves out [CLS] and [SEP], so a head that parks everything there is not
    "confident" (all keys when none would be left)."""
    if keys is None or not keys.any():
        return att.max(-1).mean(-1)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], keys.astype(np.int8), [0]])))  # where runs of True start/end
    best = None
    for a, b in zip(edges[::2], edges[1::2]):  # the max over each run of kept keys (a view, not a copy)
        part = att[..., a:b].max(-1)
        best = part if best is None else np.maximum(best, part)
    return best.mean(-1)


def positional(att: np.ndarray, min_share: float = POSITIONAL_MIN) -> tuple[np.ndarray, np.ndarray]:
    """Positional heads: the argmax key sits at the same offset j - i for >= min_share of queries.

    Returns (flag (L, H) bool, most common offset (L, H) int).
    """
    T = att.shape[-1]
    L, H = att.shape[:2]
    # (L, H, T) argmax offset, shifted to >= 0; layer by layer: numpy's argmax copies its input
    offsets = np.stack([layer.argmax(-1) for layer in att]) - np.arange(T) + T
    counts = np.stack([np.bincount(row, minlength=2 * T) for row in offsets.reshape(L * H, T)])
    counts = counts.reshape(L, H, 2 * T)  # (L, H, 2T) how many queries have each offset
    return counts.max(-1) / T >= min_share, counts.argmax(-1) - T


NOT_SINKS = ("to punctuation", "to itself", "to previous", "to next")  # every other share is a parking place


def parking(tokens: list[str], first: bool, special: tuple[str, ...] = ("[CLS]", "[SEP]")) -> dict[str, list[int]]:
    """Where heads park attention, by name: the first token (an attention sink, as in a causal
    decoder), else each special token's positions."""
    if first:
        return {"the first token": [0]}
    return {t: [i for i, x in enumerate(tokens) if x == t] for t in special}


def head_measures(
    attentions: np.ndarray,
    tokens: list[str],
    segment_ids: list[int] | None = None,
    causal: bool = False,
    parked: dict[str, list[int]] | None = None,
    windows: tuple[int | None, ...] | None = None,
) -> dict[str, np.ndarray]:
    """Every per-head measure, each (L, H), in one dict (Clark et al. 2019; Voita et al. 2019).

    Shares follow Clark et al. 2019's code: the mean over the counted queries of the weight on each
    parking place (`parked`: name -> positions, "to <name>"; default `parking`), on the tokens "."
    and "," ("to punctuation"), on the query itself, on the previous and on the next token (these
    two over the queries that have one, so a head that always reads the previous token scores 1,
    not (T - 1) / T). "entropy / ln T" divides each row's entropy by the most it can have, ln of
    the number of keys the query can read, so that sentences of different lengths compare.
    Confidence leaves the parking places out.

    causal: query i reads keys 0..i only. The first query, which can read nothing but itself, is
    then not counted in any mean, and there is no next token to read. windows: per layer, a sliding
    window (None: none), which caps the keys a query can read (Traits.windows).
    """
    att = np.asarray(attentions, dtype=np.float32)
    T = att.shape[-1]
    if causal and T < 2:
        raise ValueError("a causal map of one token has no query that could read another")
    first = 1 if causal else 0  # the first counted query
    rows = att[..., first:, :]  # (L, H, T - first, T): the counted queries
    toks = np.array(tokens)
    parked = parking(tokens, causal) if parked is None else parked
    is_sink = np.zeros(T, dtype=bool)
    out = {}
    for name, positions in parked.items():
        keys = np.zeros(T, dtype=bool)
        keys[positions] = True
        is_sink |= keys
        out[f"to {name}"] = _mean_share(rows, keys)
    out["to punctuation"] = _mean_share(rows, np.isin(toks, PUNCTUATION))
    out["to itself"] = np.diagonal(att, axis1=-2, axis2=-1)[..., first:].mean(-1)
    out["to previous"] = offset_share(att, -1)
    if not causal:
        out["to next"] = offset_share(att, 1)
    row_ent = row_entropy(rows)  # (L, H, T - first)
    per_layer = windows if windows is not None else (None,) * att.shape[0]
    readable = np.stack([metrics.readable_keys(T, causal, w)[first:] for w in per_layer])[:, None]  # (L, 1, T - first)
    out["entropy"] = row_ent.mean(-1)
    out["entropy / ln T"] = (row_ent / np.log(np.maximum(readable, 2))).mean(-1)
    out["confidence"] = confidence(rows, ~is_sink)
    flag, offset = positional(att)
    out["positional"] = flag
    out["argmax offset"] = offset
    if segment_ids is not None and 1 in segment_ids:
        seg = np.asarray(segment_ids)
        same = seg[:, None] == seg[None, :]  # (T, T) query and key in the same sentence
        out["within sentence"] = (att * same).sum(-1).mean(-1)
    return out


NUMBERS = ("entropy", "entropy / ln T", "confidence", "within sentence")  # the measures besides the shares


def numeric(m: dict[str, np.ndarray]) -> list[str]:
    """The measures of m a chart can colour by (every share, entropy, confidence, within sentence)."""
    return [*shares(m), *(k for k in NUMBERS if k in m)]


def sink_keys(m: dict[str, np.ndarray]) -> list[str]:
    """The shares of m on parking places ("to [CLS]", "to [SEP]", "to the first token", ...)."""
    return [k for k in shares(m) if k not in NOT_SINKS]


def sink_share(m: dict[str, np.ndarray]) -> np.ndarray:
    """(L, H) each head's share on the tokens heads park on (sink_keys)."""
    return sum(m[k] for k in sink_keys(m))


def shares(m: dict[str, np.ndarray]) -> list[str]:
    """The share measures of m ("to ..."), in order."""
    return [k for k in m if k.startswith("to ")]


def pattern_labels(m: dict[str, np.ndarray], n_tokens: int, th: dict[str, float] = PATTERN_THRESHOLDS) -> np.ndarray:
    """A Kovaleva et al. 2019-style pattern per head from its measures -> (L, H) str.

    vertical (to [CLS]/[SEP]), diagonal (to the previous/next token), vertical+diagonal,
    block (stays within its sentence of a pair), heterogeneous (none of these). A share only
    counts if it is also at least twice what uniform attention over n_tokens would give, so
    that short inputs are not all labelled by chance.
    """
    uniform = 2.0 / max(n_tokens, 1)  # the share of two keys under uniform attention
    vertical = sink_share(m)
    diagonal = m["to previous"] + m.get("to next", 0.0)

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


def rollout_row(attentions: np.ndarray, token: int) -> np.ndarray:
    """rollout(attentions)[:, token, :] -> (L, T) without the (T, T) products: row `token` of R_l
    is e_token A_l' A_(l-1)' ... A_0', carried as one row vector per layer (L^2 / 2 vector-matrix
    products instead of L matrix products)."""
    L, _, T, _ = attentions.shape
    a = []
    for l in range(L):
        m = attentions[l].mean(0, dtype=np.float64) + np.eye(T)  # (T, T): 2 x (0.5 mean_h A + 0.5 I)
        a.append(m / m.sum(-1, keepdims=True))
    out = np.empty((L, T))
    for l in range(L):
        row = a[l][token]  # (T,)
        for k in range(l - 1, -1, -1):
            row = row @ a[k]
        out[l] = row
    return out


def even_rollout_share(
    n_layers: int, n_tokens: int, token: int, windows: tuple[int | None, ...] | None = None
) -> float:
    """The rollout on the first token of `token` at the last layer when every head of every layer
    spreads each query evenly over the keys it can read: 0..i, or its last W on a layer with a sliding
    window of W (windows: per layer, Traits.windows; a causal baseline)."""
    from mha.core.masks import attention_mask_for

    row = np.zeros(n_tokens)
    row[token] = 1.0  # (T,): e_token, carried down the layers (rollout_row's way: no (L, T, T) stack)
    for layer in reversed(range(n_layers)):
        w = None if windows is None else windows[layer]
        allowed = attention_mask_for(None, n_tokens, True, window=w).numpy().astype(float)  # (T, T)
        a = 0.5 * allowed / allowed.sum(1, keepdims=True) + 0.5 * np.eye(n_tokens)  # rows sum to 1 already
        row = row @ a
    return float(row[0])


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
NEAR_UNIFORM = 0.9  # entropy at least this share of the most a row can have: "widely"


def most_entropy(n_tokens: int, causal: bool = False, window: int | None = None) -> float:
    """The largest mean entropy a head's rows can have (nats): ln T, or for a causal map the mean
    of ln(keys query i reads) over the queries 1..T-1: i + 1, at most a sliding window's W."""
    if causal and n_tokens > 1:
        return float(np.log(metrics.readable_keys(n_tokens, True, window)[1:]).mean())
    return float(np.log(max(n_tokens, 2)))


def describe(
    m: dict[str, np.ndarray], label: str, layer: int, head: int, n_tokens: int, window: int | None = None
) -> str:
    """One line on what a head does, from its measures: "mostly" only where a share is at least
    MOSTLY, "widely" only where the entropy is at least NEAR_UNIFORM of the most it can
    have (most_entropy; a causal map's measures have no "to next")."""
    pick = {k: float(v[layer, head]) for k, v in m.items() if k.startswith("to ") or k in ("entropy", "confidence")}
    shares = {k: v for k, v in pick.items() if k.startswith("to ")}
    top, share = max(shares.items(), key=lambda kv: kv[1])
    named = {"to the first token": "the first token", "to itself": "itself", "to previous": "the previous token"}
    named |= {"to next": "the next token", "to punctuation": "the tokens “.” and “,” together"}  # Clark et al.'s
    where = named.get(top, f"the {top[3:]} token")
    causal = "to next" not in m
    most = most_entropy(n_tokens, causal, window)
    if share >= MOSTLY:
        text = f"Layer {layer}, head {head} ({label}): attends mostly to {where} ({share:.0%})"
    else:
        spread = (
            f"spreads its attention widely (at least {NEAR_UNIFORM:.0%} of the most entropy a row can have)"
            if pick["entropy"] >= NEAR_UNIFORM * most
            else "spreads its attention"
        )
        text = (
            f"Layer {layer}, head {head} ({label}): {spread}; of "
            + ", ".join([*(k[3:] for k in sink_keys(m)), "punctuation", "itself"])
            + (" and the previous token" if causal else " and its neighbours")
            + f", the most goes to {where} ({share:.0%})"
        )
    if bool(m["positional"][layer, head]):
        text += f"; positional (offset {int(m['argmax offset'][layer, head]):+d})"
    return (
        text
        + f"; entropy {pick['entropy']:.2f} of at most "
        + ("the mean of ln(keys it can read)" if causal else "ln T")
        + f" = {most:.2f} nats, confidence {pick['confidence']:.2f}."
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


def value_weighted_row(module, x, query: int, weights: torch.Tensor | None = None) -> np.ndarray:
    """||sum_h alpha^h_(query,j) f_h(x_j)|| for every key j -> (T,): Kobayashi et al. 2020's
    norm for a whole layer (the norm of the sum over heads, not a sum or mean of norms).
    weights: (H, T) the query's attention in every head if known (a run's own), else computed
    (module.trace); only the values are projected then."""
    with torch.inference_mode():
        if weights is None:
            return value_weighted_row(module, x, query, module.trace(x).weights[0, :, query])
        T, H, D = x.shape[1], module.n_heads, module.d_head
        v = module.v_proj(x[0]).view(T, -1, D)  # (T, n, D): n value projections (H, G or 1)
        v = v.repeat_interleave(H // v.shape[1], dim=1)  # (T, H, D): head i reads projection i // (H / n)
        weighted = (weights.T.to(v.dtype)[:, :, None] * v).reshape(T, H * D)  # (T, H*D): alpha^h_j v_h(x_j)
        summed = weighted @ module.out_proj.weight.T  # (T, C): sum_h alpha^h_j v_h(x_j) W_h^O
        return summed.norm(dim=-1).numpy()


def measures(run: Run) -> dict[str, np.ndarray]:
    """Every per-head measure of a run, each (L, H), plus "pattern" labels (L, H)."""
    t = run.traits
    parked = parking(run.tokens, t.parking == "first", t.special_tokens)
    m = head_measures(run.attentions, run.tokens, run.segment_ids, t.causal, parked, t.windows)
    m["pattern"] = pattern_labels(m, run.n_tokens)
    return m


def hover_text(m: dict[str, np.ndarray]) -> list[list[str]]:
    """For each head, every measure on one hover card (L x H strings)."""
    L, H = m["entropy"].shape
    cards = []
    for l in range(L):
        row = []
        for h in range(H):
            lines = [f"<b>layer {l}, head {h}</b>: {m['pattern'][l, h]}"]
            lines += [f"{k}: {m[k][l, h]:.0%}" for k in shares(m)]
            lines += [
                f"entropy: {m['entropy'][l, h]:.2f} nats ({m['entropy / ln T'][l, h]:.0%} of ln T)",
                f"confidence: {m['confidence'][l, h]:.2f}",
            ]
            if m["positional"][l, h]:
                lines.append(f"positional, offset {int(m['argmax offset'][l, h]):+d}")
            row.append("<br>".join(lines))
        cards.append(row)
    return cards


def to_csv(m: dict[str, np.ndarray]) -> bytes:
    """The measures table, one row per head: layer, head, pattern, then every measure."""
    L, H = m["entropy"].shape
    layer, head = np.divmod(np.arange(L * H), H)
    columns = {"layer": layer, "head": head, "pattern": m["pattern"].ravel()}
    columns |= {k: v.ravel().astype(float) for k, v in m.items() if k != "pattern"}
    return pd.DataFrame(columns).to_csv(index=False, float_format="%.6g").encode()


def token_views(bert: LoadedModel, run: Run, token: int) -> dict[str, np.ndarray]:
    """Where token `token` reads, layer by layer, three ways, each (L, T) with rows summing to 1:

    raw: attention averaged over heads; rollout: Abnar & Zuidema 2020 (through the layers);
    value-weighted: ||sum_h alpha^h f_h(x)|| (Kobayashi et al. 2020: the norm of the sum over
    heads), renormalised to sum to 1 per layer.
    """
    if not 0 <= token < run.n_tokens:
        raise ValueError(f"token must be in 0..{run.n_tokens - 1}, got {token}")
    raw = run.attentions[:, :, token, :].mean(1)  # (L, T)
    roll = rollout_row(run.attentions, token)  # (L, T)
    vw = []
    for l in range(run.n_layers):
        x = run.layer_input(l)  # (1, T, C)
        weights = torch.tensor(run.attentions[l, :, token, :])  # (H, T): the run's own, not recomputed
        row = value_weighted_row(bert.scratch_layer(l), x, token, weights)  # (T,)
        vw.append(row / row.sum())
    return {"raw attention": raw, "rollout": roll, "value-weighted": np.stack(vw)}


def compare(
    m_a: dict[str, np.ndarray], m_b: dict[str, np.ndarray], measure: str, top: int = 5
) -> tuple[np.ndarray, list[tuple[int, int, float, float]]]:
    """Per-head difference B - A of one measure (L, H), and the heads that change most:
    [(layer, head, value in A, value in B), ...]."""
    diff = m_b[measure].astype(float) - m_a[measure].astype(float)
    order = np.argsort(np.abs(diff), axis=None)[::-1][:top]
    H = diff.shape[1]
    return diff, [(int(i // H), int(i % H), float(m_a[measure].flat[i]), float(m_b[measure].flat[i])) for i in order]


def find_token(tokens: list[str], word: str, default: int) -> int:
    """Position of the first token equal to `word` (lower case), else `default`."""
    low = [t.lower() for t in tokens]
    return low.index(word) if word in low else default
