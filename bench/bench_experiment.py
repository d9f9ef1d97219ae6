"""Wall time of the default training experiment (three models, single process; target <= 45 s)
and the longest gap between progress updates (target <= 1 s), redrawing the live chart twice a
second as the page does; the time to the first update is reported apart.

    python bench/bench_experiment.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import common  # noqa: F401  (this checkout first on sys.path)

from mha import plots
from mha.analyses import experiment as ex


def once(settings: ex.Settings) -> tuple[float, float, float, dict]:
    """(wall time, longest gap between updates, time to the first update, the models)."""
    stamps = [time.perf_counter()]

    def progress(p: ex.Progress) -> None:
        plots.training.training_curves(p.curves).to_json()  # what the page sends
        stamps.append(time.perf_counter())

    t0 = time.perf_counter()
    result = ex.run(settings, progress, every=0.5)  # the page's setting
    total = time.perf_counter() - t0
    gap = max(b - a for a, b in zip(stamps[1:], stamps[2:]))
    return total, gap, stamps[1] - stamps[0], result.models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    s = ex.Settings()
    totals, gaps, firsts = [], [], []
    for _ in range(args.repeats):
        total, gap, first, models = once(s)
        totals.append(total)
        gaps.append(gap)
        firsts.append(first)
    acc = {k: f"{m.final_accuracy:.2%}" for k, m in models.items()}
    print(f"default experiment {s}")
    print(f"wall time median {statistics.median(totals):.1f} s (max {max(totals):.1f}; target <= 45)")
    print(f"longest gap between progress updates {max(gaps) * 1e3:.0f} ms (target <= 1000)")
    print(
        f"time to the first update: {firsts[0]:.2f} s in a new process (PyTorch imports "
        f"torch._dynamo on the first Adam), then {statistics.median(firsts[1:] or firsts):.2f} s"
    )
    print(f"held-out all-targets accuracy: {acc}")


if __name__ == "__main__":
    main()
