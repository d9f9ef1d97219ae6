"""Where heads park attention: the share of every head's weight on the run's sink tokens (BERT's
[CLS] and [SEP], a decoder's first token; Clark et al. 2019, Xiao et al. 2024 "Efficient Streaming
Language Models with Attention Sinks"), counted over the queries that could read something else."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SinkShare:
    """per_head: (L, H) mean weight on the sinks over the counted queries; queries: how many were
    counted (a query that sees only sinks, e.g. a decoder's first token, is not)."""

    per_head: np.ndarray
    queries: int

    @property
    def mean(self) -> float:
        return float(self.per_head.mean())

    def heads_over(self, share: float = 0.5) -> int:
        """How many heads put more than `share` of their weight on the sinks (mean over queries)."""
        return int((self.per_head > share).sum())


def sink_share(attentions: np.ndarray, sinks: list[int], causal: bool) -> SinkShare:
    """attentions (L, H, T, T), sink positions, and whether query i sees only keys 0..i."""
    T = attentions.shape[-1]
    is_sink = np.zeros(T, dtype=bool)
    is_sink[sinks] = True
    if causal:  # query i sees a non-sink key iff one lies at or before i
        counted = np.cumsum(~is_sink) > 0  # (T,)
    else:
        counted = np.full(T, bool((~is_sink).any()))
    if not counted.any() or not is_sink.any():
        return SinkShare(np.zeros(attentions.shape[:2]), 0)
    on = attentions[..., is_sink].sum(-1)[..., counted]  # (L, H, Q)
    return SinkShare(on.mean(-1), int(counted.sum()))
