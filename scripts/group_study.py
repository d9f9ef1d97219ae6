"""Do SmolLM2's query heads that share one K/V still attend differently? Over the bundled pool of
sentences (mha/data/pool_sentences.txt, written for this project), per layer: the mean
Jensen-Shannon divergence between two query heads of one K/V group and of two different groups,
and where the model's grouping ranks among all 280 ways to cut 9 heads into 3 groups of 3.

    python -m mha.models.fetch && python scripts/group_study.py
"""

from __future__ import annotations

import math
import time

import numpy as np

from mha.analyses import groups
from mha.analyses.subspaces import pool_sentences
from mha.models import fetch
from mha.models.llama import LoadedLlama


def main() -> None:
    started = time.perf_counter()
    dec = LoadedLlama.load(fetch.decoder_dir(), "SmolLM2-135M-Instruct")
    texts = pool_sentences()
    per_text = [groups.layer_diversity(dec.attend(t).attentions) for t in texts]
    g = groups.group_diversity(per_text, dec.n_heads, dec.traits.kv_groups)
    bits = 1 / math.log(2)
    print(
        f"{dec.name}: {dec.n_layers} layers, {dec.n_heads} query heads, {dec.traits.kv_groups} K/V heads; "
        f"{g.texts} texts"
    )
    print(f"{'layer':>5} {'within':>8} {'across':>8} {'rank':>6}   (JS in bits; rank among {g.n_partitions} cuts)")
    for layer, (w, a, r) in enumerate(zip(g.within, g.across, g.rank)):
        print(f"{layer:>5} {w * bits:>8.3f} {a * bits:>8.3f} {r:>6.3f}")
    print(
        f"mean over layers: within {g.within.mean() * bits:.3f} bits, across {g.across.mean() * bits:.3f} bits; "
        f"same-group pairs more alike in {g.layers_more_alike} of {dec.n_layers} layers; the model's grouping "
        f"in the lowest 5% of partitions in {int((g.rank <= 0.05).sum())} layers, median rank {np.median(g.rank):.3f}"
    )
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
