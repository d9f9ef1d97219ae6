"""Budget of the collapse page at 128 tokens on the bundled model (model loaded, no cache).

- one layer recomputed with shared Q/K/V plus every measure: target <= 0.3 s
- the alpha sweep (11 points): target <= 2 s
- the whole-model effect (shared in every layer), for reference

    python bench/bench_collapse.py [--runs 7]
"""

from __future__ import annotations

import argparse

from common import median_seconds, sentence, server_threads

server_threads()
from mha import collapse  # noqa: E402
from mha.bert import load_bert  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    bert = load_bert()
    run = bert.attend(sentence(128, 1))
    assert run.n_tokens == 128
    rows = [
        ("one layer, shared, all measures", 0.3, lambda: collapse.collapse_layer(bert, run, 2, 1.0)),
        ("alpha sweep, 11 points", 2.0, lambda: collapse.alpha_sweep(bert, run, 2)),
        ("whole model, every layer shared", None, lambda: collapse.whole_model_effect(bert, run, range(bert.n_layers))),
    ]
    print(f"128 tokens, median of {args.runs} runs")
    for name, budget, fn in rows:
        t = median_seconds(fn, args.runs)
        verdict = "" if budget is None else ("OK" if t <= budget else "OVER")
        print(f"{name:<34} {t:7.3f} s  budget {budget if budget else '-':>4}  {verdict}")


if __name__ == "__main__":
    main()
