"""Where heads park attention: the share of every head's weight on the run's sink tokens (BERT's
[CLS] and [SEP], a decoder's first token; Clark et al. 2019, Xiao et al. 2024 "Efficient Streaming
Language Models with Attention Sinks"), counted over the queries that could read something else."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SinkShare:
    """per_head: (L, H) mean weight on the sinks over each layer's counted queries; counted: (L,) how
    many queries each layer counts (a query that sees only sinks, e.g. a decoder's first token, is not,
    nor one whose sliding window has passed every sink)."""

    per_head: np.ndarray
    counted: tuple[int, ...]

    @property
    def queries(self) -> int:
        """The most queries any layer counts (every layer's, without a window)."""
        return max(self.counted, default=0)

    @property
    def windowed(self) -> bool:
        """Whether some layers count fewer queries (their window passes the sinks)."""
        return len(set(self.counted)) > 1

    @property
    def mean(self) -> float:
        return float(self.per_head.mean())

    def heads_over(self, share: float = 0.5) -> int:
        """How many heads put more than `share` of their weight on the sinks (mean over queries)."""
        return int((self.per_head > share).sum())


def sink_share(
    attentions: np.ndarray, sinks: list[int], causal: bool, windows: tuple[int | None, ...] | None = None
) -> SinkShare:
    """attentions (L, H, T, T), sink positions, whether query i sees only keys 0..i, and per layer a
    sliding window (its last W keys; Traits.windows): a query counts on a layer if it can read a sink
    and another token there."""
    L, T = attentions.shape[0], attentions.shape[-1]
    is_sink = np.zeros(T, dtype=bool)
    is_sink[sinks] = True
    if causal:  # query i sees a non-sink key iff one lies at or before i
        counted = np.cumsum(~is_sink) > 0  # (T,)
    else:
        counted = np.full(T, bool((~is_sink).any()))
    if not counted.any() or not is_sink.any():
        return SinkShare(np.zeros(attentions.shape[:2]), (0,) * L)
    per_head, counts = np.zeros(attentions.shape[:2]), []
    for layer in range(L):
        w = None if windows is None else windows[layer]
        here = counted.copy()
        if causal and w is not None:  # query i reads keys i - w + 1 .. i: a sink among them
            last_sink = np.maximum.accumulate(np.where(is_sink, np.arange(T), -1))  # (T,) latest sink <= i
            here &= (last_sink >= 0) & (np.arange(T) - last_sink < w)
        counts.append(int(here.sum()))
        if here.any():
            per_head[layer] = attentions[layer][..., is_sink].sum(-1)[:, here].mean(-1)  # (H,)
    return SinkShare(per_head, tuple(counts))
