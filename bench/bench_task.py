"""The bundled model's task: one evaluate on the bundled pairs (<= 1 s), the 72-head importance
(<= 30 s, a progress update at least every second), and the whole "Do we need every head?" study
as the page runs it (every core): heads ranked on the STS Benchmark's train pairs, pruning curves
scored on its dev pairs and on the written pairs (held out, with bootstrap intervals), on the
ranking pairs (in sample) and in random orders; with its figures.

    python bench/bench_task.py [--runs 5]
    python bench/bench_task.py --shipped   # only the shipped study's figures
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from common import median_seconds, server_threads, with_progress

server_threads()

import numpy as np  # noqa: E402
import torch  # noqa: E402

from mha.analyses import collapse  # noqa: E402
from mha.models.catalog import load_model  # noqa: E402
from mha.tasks import pruning, similarity  # noqa: E402


def curve(c: similarity.PruningCurve) -> str:
    return " ".join(f"{n}:{s:.3f}" for n, s in zip(c.removed, c.spearman))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--shipped", action="store_true", help="only print the shipped study's figures")
    args = parser.parse_args()
    bert = load_model()
    pairs = similarity.similarity_pairs()
    t0 = time.perf_counter()
    score = similarity.evaluate(bert)
    first = time.perf_counter() - t0
    print(f"{len(pairs)} pairs: Spearman {score.spearman:.3f} (mean pooling, cosine)")
    kinds = np.array(similarity.pair_kinds())
    for kind in sorted(set(kinds)):
        sel = kinds == kind
        grade, cosine = score.gold[sel].mean(), score.per_pair[sel].mean()
        print(f"  {kind:<11} {sel.sum():>3} pairs, grade {grade:.1f}, cosine {cosine:.2f}")
    print(
        f"evaluate: first {first:.3f} s (the pairs' hidden states entering every layer are computed and kept), "
        f"then median {median_seconds(lambda: similarity.evaluate(bert), args.runs):.3f} s (budget 1.0)"
    )
    for layer in (0, bert.n_layers - 1):  # a replaced layer: only the layers from it on run again
        shared = {layer: collapse.shared_module(bert.scratch_layer(layer))}
        t = median_seconds(lambda s=shared: similarity.evaluate(bert, replace=s), args.runs)
        print(f"evaluate with layer {layer} shared: median {t:.3f} s")
    t = median_seconds(lambda: similarity.evaluate(bert, head_mask=np.ones((bert.n_layers, bert.n_heads))), args.runs)
    print(f"evaluate with a head mask (every layer runs): median {t:.3f} s")
    imp, took, gap, _ = with_progress(lambda progress: similarity.head_importance(bert, progress=progress))
    print(
        f"importance of {imp.drop.size} heads, 1 torch thread (the server's): {took:.1f} s "
        f"(budget 30), longest gap between updates {gap:.2f} s (budget 1); agreement |drop| vs gradient "
        f"{imp.agreement():.2f}"
    )
    torch.set_num_threads(os.cpu_count() or 1)  # as the page runs the study (ui.server.all_cores)
    study, took, gap, runs = with_progress(lambda progress: pruning.heads_study(bert, progress=progress))
    print(
        f"the whole study, {os.cpu_count()} torch threads: {took:.1f} s, {runs} model runs, longest gap between "
        f"updates {gap:.2f} s"
    )
    print_study(study)


def print_study(study: pruning.HeadsStudy) -> None:
    """The study's figures, from a study computed here or the shipped one."""
    tol = study.tolerance
    print(
        f"  ranked on {study.n_rank} STS train pairs (full model Spearman {study.importance.base:.3f}); two halves "
        f"of them rank the heads alike at Spearman {min(study.halves_agreement):.2f} to "
        f"{max(study.halves_agreement):.2f} ({len(study.halves_agreement)} random halvings); |drop| vs gradient "
        f"{study.importance.agreement():.2f}"
    )
    for h in study.held_out:
        n = h.can_go(tol)
        change, low, high = h.change_at(n)
        print(
            f"  held out on {pruning.SCORED_ON[h.name]} ({h.n_pairs} pairs): {n} heads can go before Spearman drops "
            f"by {tol} (change {change:+.3f}, {study.level:.0%} interval {low:+.3f} to {high:+.3f}); with the whole "
            f"interval above -{tol}: {pruning.seed_spread(h.strict)} (count, bootstrap seeds); "
            f"full {h.curve.spearman[0]:.3f}, no head left "
            f"{h.curve.spearman[-1]:.3f}"
        )
        print(f"    curve: {curve(h.curve)}")
    print(f"  in sample (ranked and scored on the train pairs): {study.in_sample.can_go(tol)}")
    print(f"  random orders on the dev pairs (seeds {list(study.seeds)}): {sorted(study.random_can_go())}")


if __name__ == "__main__":
    if "--shipped" in sys.argv:  # the figures of the study shipped with the package, without computing it
        print_study(pruning.shipped_study(load_model()))
    else:
        main()
