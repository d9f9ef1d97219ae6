"""The bundled model's task: one evaluate on the bundled pairs (<= 1 s), the 72-head importance
(<= 30 s, a progress update at least every second) and the pruning curves (<= 30 s), with the
server's thread settings (one torch thread), and the figures the README quotes.

    python bench/bench_task.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import time

from common import median_seconds, server_threads

server_threads()

import numpy as np  # noqa: E402
import torch  # noqa: E402

from mha import task  # noqa: E402
from mha.bert import load_bert  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    bert = load_bert()
    pairs = task.similarity_pairs()
    score = task.evaluate(bert)
    print(f"{len(pairs)} pairs: Spearman {score.spearman:.3f} (mean pooling, cosine)")
    kinds = np.array(task.pair_kinds())
    for kind in sorted(set(kinds)):
        sel = kinds == kind
        grade, cosine = score.gold[sel].mean(), score.per_pair[sel].mean()
        print(f"  {kind:<11} {sel.sum():>3} pairs, grade {grade:.1f}, cosine {cosine:.2f}")
    print(f"evaluate: median {median_seconds(lambda: task.evaluate(bert), args.runs):.3f} s (budget 1.0)")
    for threads in (1, os.cpu_count()):  # the server's setting, then what the page uses (ui.server.all_cores)
        torch.set_num_threads(threads)
        stamps = [time.perf_counter()]
        imp = task.head_importance(bert, progress=lambda done, total, s=stamps: s.append(time.perf_counter()))
        took = stamps[-1] - stamps[0]
        gap = max(b - a for a, b in zip(stamps, stamps[1:]))
        print(
            f"importance of {imp.drop.size} heads, {threads} torch thread(s): {took:.1f} s (budget 30), longest "
            f"gap between updates {gap:.2f} s (budget 1); agreement |drop| vs gradient {imp.agreement():.2f}"
        )
    steps = list(range(0, imp.drop.size + 1, 6))
    t0 = time.perf_counter()  # still on every core
    pruned = task.pruning_curve(bert, task.order_by(imp.drop), steps)
    rand = task.pruning_curve(bert, task.random_order(*imp.drop.shape), steps)
    print(f"pruning curves, {len(steps)} points each, both orders: {time.perf_counter() - t0:.1f} s (budget 30)")
    print(
        f"  least important first: {pruned.can_go()} of {imp.drop.size} heads can go before Spearman drops by "
        f"0.02; random order: {rand.can_go()}; none left: {pruned.spearman[-1]:.3f}"
    )
    print("  least important first:", " ".join(f"{n}:{s:.3f}" for n, s in zip(pruned.removed, pruned.spearman)))
    print("  random order:         ", " ".join(f"{n}:{s:.3f}" for n, s in zip(rand.removed, rand.spearman)))


if __name__ == "__main__":
    main()
