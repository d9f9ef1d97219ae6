"""Do query heads that share one K/V projection (grouped-query attention) still attend differently?

In a GQA layer the H query heads fall into G groups of H / G consecutive heads, each group reading
one K and one V (Ainslie et al. 2023). Two heads of one group see the same keys, so any difference
between their maps comes from their own W_i^Q. `group_diversity` measures the mean Jensen-Shannon
divergence between two heads' maps for the pairs inside a group and for the pairs across groups;
`partition_rank` puts the within-group mean beside every other way of cutting the H heads into G
groups of the same size (the baseline: a grouping that had nothing to do with the maps would sit
in the middle of them).

A causal map's first row has one key to read: every head gives it weight 1, so that row is left
out (it would pull every pair towards 0).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from mha.analyses import metrics


def groups_of(n_heads: int, kv_heads: int) -> np.ndarray:
    """(H,) the K/V group each query head reads: head h reads group h // (H / G)."""
    if n_heads % kv_heads:
        raise ValueError(f"{kv_heads} K/V heads do not divide {n_heads} query heads")
    if not 1 < kv_heads < n_heads:
        raise ValueError(f"within and across need 2 or more groups of 2 or more heads: {kv_heads} of {n_heads}")
    return np.arange(n_heads) // (n_heads // kv_heads)


def group_ranges(n_heads: int, kv_heads: int) -> str:
    """The heads of each K/V group in words: "0-2, 3-5, 6-8" for 9 heads in 3 groups."""
    size = n_heads // kv_heads
    return ", ".join(f"{g * size}-{(g + 1) * size - 1}" for g in range(kv_heads))


def pair_means(diversity: np.ndarray, group: np.ndarray) -> tuple[float, float]:
    """(mean over same-group pairs, mean over cross-group pairs) of an (H, H) divergence matrix."""
    i, j = np.triu_indices(len(group), 1)
    same = group[i] == group[j]
    return float(diversity[i, j][same].mean()), float(diversity[i, j][~same].mean())


def layer_diversity(attentions: np.ndarray, causal: bool = True) -> np.ndarray:
    """(L, H, T, T) attention of one text -> (L, H, H) head diversity (JS, nats), mean over the
    queries that read at least two keys (all of them when not causal)."""
    if attentions.shape[-1] - (1 if causal else 0) < 1:
        raise ValueError("a text of one token has no row to compare")
    return np.stack([metrics.head_diversity(metrics.causal_rows(a, causal)) for a in attentions])


def within_across(attentions: np.ndarray, layer: int, n_heads: int, kv_heads: int) -> tuple[float, float]:
    """(within, across): the mean head diversity of same-group and of cross-group pairs in one
    layer of one text's attention (L, H, T, T)."""
    one = layer_diversity(attentions[layer : layer + 1])[0]  # (H, H)
    return pair_means(one, groups_of(n_heads, kv_heads))


@dataclass(frozen=True)
class GroupDiversity:
    """Per layer (L,): mean JS within groups and across groups, over `texts` texts; `rank`: the
    share of all equal-size partitions of the heads whose within-group mean is at most the model's
    (small = the model's groups are unusually alike; 1/n_partitions at the least)."""

    within: np.ndarray
    across: np.ndarray
    rank: np.ndarray
    n_partitions: int
    texts: int

    @property
    def median_rank(self) -> float:
        return float(np.median(self.rank))

    @property
    def layers_more_alike(self) -> int:
        """Layers whose same-group pairs are on average more alike than cross-group pairs."""
        return int((self.within < self.across).sum())


def partitions(n_heads: int, kv_heads: int) -> list[np.ndarray]:
    """Every way to cut n_heads heads into kv_heads unlabelled groups of equal size, as (H,) group ids."""
    size = n_heads // kv_heads
    count = math.factorial(n_heads) // (math.factorial(size) ** kv_heads * math.factorial(kv_heads))
    if count > 100_000:
        raise ValueError(f"{count:,} partitions of {n_heads} heads into {kv_heads} groups: too many to rank against")
    out: list[np.ndarray] = []

    def cut(left: tuple[int, ...], labels: dict[int, int], g: int) -> None:
        if not left:
            out.append(np.array([labels[h] for h in range(n_heads)]))
            return
        first, rest = left[0], left[1:]
        for others in itertools.combinations(rest, size - 1):
            remaining = tuple(h for h in rest if h not in others)
            cut(remaining, {**labels, first: g, **{h: g for h in others}}, g + 1)

    cut(tuple(range(n_heads)), {}, 0)
    return out


def partition_rank(diversity: np.ndarray, group: np.ndarray, every: list[np.ndarray]) -> float:
    """The share of partitions in `every` whose within-group mean is at most that of `group`."""
    mine = pair_means(diversity, group)[0]
    return float(np.mean([pair_means(diversity, p)[0] <= mine + 1e-12 for p in every]))


def group_diversity(per_text: list[np.ndarray], n_heads: int, kv_heads: int) -> GroupDiversity:
    """From layer_diversity of each text: the within- and across-group means per layer, averaged
    over the texts, and the rank of the within-group mean among every equal-size partition."""
    mean = np.mean(per_text, axis=0)  # (L, H, H)
    group = groups_of(n_heads, kv_heads)
    every = partitions(n_heads, kv_heads)
    within, across = zip(*(pair_means(d, group) for d in mean))
    rank = [partition_rank(d, group, every) for d in mean]
    return GroupDiversity(np.array(within), np.array(across), np.array(rank), len(every), len(per_text))
