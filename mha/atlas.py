"""The head atlas: every head's measures as a table, token-level views, two-sentence comparison.

Glue between a BERT run and `metrics`; pure functions of their inputs, no Streamlit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from . import metrics

if TYPE_CHECKING:
    from .bert import BertRun, LoadedBert

SHARES = ("to [CLS]", "to [SEP]", "to punctuation", "to itself", "to previous", "to next")


def measures(run: BertRun) -> dict[str, np.ndarray]:
    """Every per-head measure of a run, each (L, H), plus "pattern" labels (L, H)."""
    m = metrics.head_measures(run.attentions, run.tokens, run.segment_ids)
    m["pattern"] = metrics.pattern_labels(m, run.n_tokens)
    return m


def hover_text(m: dict[str, np.ndarray]) -> list[list[str]]:
    """For each head, every measure on one hover card (L x H strings)."""
    L, H = m["entropy"].shape
    cards = []
    for l in range(L):
        row = []
        for h in range(H):
            lines = [f"<b>layer {l}, head {h}</b>: {m['pattern'][l, h]}"]
            lines += [f"{k}: {m[k][l, h]:.0%}" for k in SHARES]
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


def token_views(bert: LoadedBert, run: BertRun, token: int) -> dict[str, np.ndarray]:
    """Where token `token` reads, layer by layer, three ways, each (L, T) with rows summing to 1:

    raw: attention averaged over heads; rollout: Abnar & Zuidema 2020 (through the layers);
    value-weighted: ||sum_h alpha^h f_h(x)|| (Kobayashi et al. 2020: the norm of the sum over
    heads), renormalised to sum to 1 per layer.
    """
    if not 0 <= token < run.n_tokens:
        raise ValueError(f"token must be in 0..{run.n_tokens - 1}, got {token}")
    raw = run.attentions[:, :, token, :].mean(1)  # (L, T)
    roll = metrics.rollout(run.attentions)[:, token, :]  # (L, T)
    vw = []
    for l in range(run.n_layers):
        x = run.layer_input(l)  # (1, T, C)
        row = metrics.value_weighted_row(bert.scratch_layer(l), x, token)  # (T,)
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
