"""Wall time of the default training experiment (three models, single process; target <= 45 s)
and the longest gap between progress updates (target <= 1 s), redrawing the live chart twice a
second as the page does; the time to the first update is reported apart.

    python bench/bench_experiment.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mha import experiment as ex  # noqa: E402
from mha import plots  # noqa: E402


def once(settings: ex.Settings) -> tuple[float, float, dict]:
    curves = {k: ([], []) for k in ex.MODELS}
    stamps, last = [time.perf_counter()], [0.0]

    def progress(step, report):
        for kind, (loss, acc) in report.items():
            curves[kind][0].append(loss)
            curves[kind][1].append(acc)
        now = time.perf_counter()
        if now - last[0] >= 0.5:
            last[0] = now
            plots.training_curves(curves).to_json()  # what the page sends
        stamps.append(time.perf_counter())

    t0 = time.perf_counter()
    result = ex.run(settings, progress)
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
    acc = {k: f"{m.final_accuracy:.1%}" for k, m in models.items()}
    print(f"default experiment {s}")
    print(f"wall time median {statistics.median(totals):.1f} s (max {max(totals):.1f}; target <= 45)")
    print(f"longest gap between progress updates {max(gaps) * 1e3:.0f} ms (target <= 1000)")
    print(f"time to the first update: {firsts[0]:.2f} s in a new process (PyTorch imports "
          f"torch._dynamo on the first Adam), then {statistics.median(firsts[1:] or firsts):.2f} s")
    print(f"held-out all-targets accuracy: {acc}")


if __name__ == "__main__":
    main()
