"""Attention as downloadable files: .npz (arrays + tokens) and long-format CSV."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd


def to_npz(attentions: np.ndarray, tokens: list[str]) -> bytes:
    """attentions (L, H, T, T) and tokens in one compressed .npz file."""
    buf = io.BytesIO()
    np.savez_compressed(buf, attentions=attentions, tokens=np.array(tokens, dtype=str))
    return buf.getvalue()


def to_csv(
    attentions: np.ndarray, tokens: list[str], layers: list[int] | None = None, heads: list[int] | None = None
) -> bytes:
    """Long format, one row per weight: layer, head, query, query_token, key, key_token, weight."""
    L, H, T, _ = attentions.shape
    layers = list(range(L)) if layers is None else layers
    heads = list(range(H)) if heads is None else heads
    sub = attentions[np.ix_(layers, heads)]  # (l, h, T, T)
    layer, head, query, key = (a.ravel() for a in np.meshgrid(layers, heads, range(T), range(T), indexing="ij"))
    names = np.asarray(tokens, dtype=object)
    table = pd.DataFrame(
        {
            "layer": layer,
            "head": head,
            "query": query,
            "query_token": names[query],
            "key": key,
            "key_token": names[key],
            "weight": sub.ravel(),
        }
    )
    return table.to_csv(index=False, float_format="%.6g").encode("utf-8")


def rows_csv(rows: list[dict]) -> bytes:
    """A table (one dict per row) as CSV, numbers to 6 significant digits."""
    return pd.DataFrame(rows).to_csv(index=False, float_format="%.6g").encode("utf-8")
