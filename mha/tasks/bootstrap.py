"""Paired bootstrap intervals of a change in Spearman's rank correlation: how far the change from
one model's scores to another's, on the same graded pairs, could move with another sample of
pairs (Efron & Tibshirani 1993). Each resample's Spearman is scipy's spearmanr on the drawn pairs
(tests/test_pruning.py), computed from how often each pair is drawn rather than by sorting every
resample: the ranks and sums are whole and half numbers, so the result is the same to the last bit.

Shapes: P pairs, B resamples, n curves of scores.
"""

from __future__ import annotations

import numpy as np


def _resampled_ranks(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(P,) values and (B, P) how often each is drawn in each resample -> (B, P) each value's rank
    within each resample, ties (equal values, a value drawn twice) at their average rank, as
    scipy's rankdata gives them: no sort per resample."""
    _, inv = np.unique(values, return_inverse=True)  # (P,): each value's group of equal values
    order = np.argsort(inv, kind="stable")  # (P,): the values by group
    starts = np.flatnonzero(np.r_[True, np.diff(inv[order]) != 0])  # (U,): where each group begins in `order`
    per_group = np.add.reduceat(counts[:, order], starts, axis=1)  # (B, U): draws of each group
    below = np.cumsum(per_group, axis=1) - per_group  # (B, U): draws of smaller values
    return (below + (per_group + 1) / 2)[:, inv]  # (B, P)


def _counted_spearman(rx: np.ndarray, ry: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Spearman's rho of each resample from its ranks (B, P) and draw counts (B, P): Pearson's r of
    the ranks, each value weighted by how often it was drawn (the mean rank is (P + 1) / 2)."""
    mid = (counts.shape[1] + 1) / 2
    dx, dy = rx - mid, ry - mid
    return (counts * dx * dy).sum(-1) / np.sqrt((counts * dx * dx).sum(-1) * (counts * dy * dy).sum(-1))


def bootstrap_change(
    cosines: np.ndarray, gold: np.ndarray, resamples: int = 1000, level: float = 0.9, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """The interval of the change in Spearman from the first row of `cosines` (the full model) to
    every row (n, P), over bootstrap resamples of the pairs (the same pairs for both): (low (n,),
    high (n,)), the central `level` of the resampled changes. Each resample's Spearman is scipy's
    spearmanr on the drawn pairs (tests/test_pruning.py), computed from how often each pair is drawn."""
    rng = np.random.default_rng(seed)
    P = gold.shape[0]
    idx = rng.integers(0, P, size=(resamples, P))  # (B, P): one resample of the pairs per row
    counts = np.bincount((idx + P * np.arange(resamples)[:, None]).ravel(), minlength=resamples * P)
    counts = counts.reshape(resamples, P).astype(np.float64)  # (B, P): how often each pair is drawn
    g = _resampled_ranks(gold, counts)  # (B, P)
    rho = np.stack([_counted_spearman(_resampled_ranks(c, counts), g, counts) for c in cosines])  # (n, B)
    changes = rho - rho[0]  # (n, B)
    tail = (1 - level) / 2 * 100
    return np.percentile(changes, tail, axis=1), np.percentile(changes, 100 - tail, axis=1)
