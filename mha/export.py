"""Attention as downloadable files: .npz (arrays + tokens) and long-format CSV."""

from __future__ import annotations

import csv
import io

import numpy as np


def to_npz(attentions: np.ndarray, tokens: list[str], **extra: np.ndarray) -> bytes:
    """attentions (L, H, T, T) and tokens in one compressed .npz file."""
    buf = io.BytesIO()
    np.savez_compressed(buf, attentions=attentions, tokens=np.array(tokens, dtype=str), **extra)
    return buf.getvalue()


def to_csv(attentions: np.ndarray, tokens: list[str], layers: list[int] | None = None,
           heads: list[int] | None = None) -> bytes:
    """Long format, one row per weight: layer, head, query, query_token, key, key_token, weight."""
    L, H, T, _ = attentions.shape
    layers = list(range(L)) if layers is None else layers
    heads = list(range(H)) if heads is None else heads
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["layer", "head", "query", "query_token", "key", "key_token", "weight"])
    for layer in layers:
        for h in heads:
            a = attentions[layer, h]
            for i in range(T):
                w.writerows((layer, h, i, tokens[i], j, tokens[j], f"{a[i, j]:.6g}") for j in range(T))
    return buf.getvalue().encode("utf-8")
