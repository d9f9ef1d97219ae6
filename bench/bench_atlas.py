"""Budget of the head atlas on the bundled model (model loaded, no cache): every per-head
measure and pattern label for all heads, plus rollout and value-weighted attention for one token.
Targets: <= 0.3 s at 128 tokens, <= 2 s at 512. Then the atlas figures, on the
bundled example sentences: the heads that read the previous and the next token most, and where
the heads labelled "vertical" put their weight ([CLS] or [SEP]).

    python bench/bench_atlas.py [--runs 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

from common import sentence, server_threads

server_threads()
import numpy as np  # noqa: E402

from mha.analyses import atlas  # noqa: E402
from mha.lesson.examples import EXAMPLES  # noqa: E402
from mha.models.catalog import load_model  # noqa: E402

BUDGET = {128: 0.3, 512: 2.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    bert = load_model()
    print(f"{'tokens':>6} {'measures s':>10} {'+ token views s':>15} {'budget s':>8}")
    for T, budget in BUDGET.items():
        run = bert.attend(sentence(T, 1))
        assert run.n_tokens == T
        atlas.measures(run)
        t_m, t_all = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            atlas.measures(run)
            t1 = time.perf_counter()
            atlas.token_views(bert, run, 3)
            t2 = time.perf_counter()
            t_m.append(t1 - t0)
            t_all.append(t2 - t0)
        a, b = statistics.median(t_m), statistics.median(t_all)
        print(f"{T:>6} {a:>10.3f} {b:>15.3f} {budget:>8.1f}  {'OK' if b <= budget else 'OVER'}")
    for name, text in EXAMPLES.items():
        m = atlas.measures(bert.attend(text))
        found = []
        for key in ("to previous", "to next"):
            lh = np.unravel_index(m[key].argmax(), m[key].shape)
            found.append(f"{key}: layer {lh[0]}, head {lh[1]} ({m[key][lh]:.0%})")
        vertical = m["pattern"] == "vertical"
        cls, sep = m["to [CLS]"][vertical], m["to [SEP]"][vertical]
        if vertical.any():
            found.append(
                f"{vertical.sum()} vertical heads, {(cls > sep).sum()} read [CLS] more than [SEP] "
                f"(mean {cls.mean():.0%} against {sep.mean():.0%})"
            )
        print(f"{name}: " + "; ".join(found))


if __name__ == "__main__":
    main()
