"""What the sharing verdict costs (mha/studies/verdict.py), for each bundled model, on every core as the
page runs it: the medians of its parts (a run of the held-out set with every layer converted, with one
layer converted alone, one layer's uptraining), each beside the reference measured in the same run, a
plain run of the held-out set; and from them the whole study. Also the training runs a learner starts
on a page (one layer's uptraining on What may be shared, the five models of Why many heads), each
against the 60 s a learner should wait at most.

    python bench/bench_verdict.py [--runs 3] [--models all-MiniLM-L6-v2 SmolLM2-135M-Instruct]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch  # noqa: E402
from common import median_seconds

from mha.analyses import experiment as ex  # noqa: E402
from mha.analyses import ladder  # noqa: E402
from mha.analyses.uptrain import generated_sentences, uptrain  # noqa: E402
from mha.models.catalog import DECODER_MODEL, DEFAULT_MODEL, load_model  # noqa: E402
from mha.studies import verdict  # noqa: E402


def parts(name: str, runs: int) -> None:
    model = load_model(name)
    H, G, L = model.n_heads, model.traits.kv_groups, model.n_layers
    mqa = next(r for r in ladder.rungs(H, False, G) if r.name == "MQA")
    every = {i: mqa.module(model.scratch_layer(i)) for i in range(L)}
    own = {0: ladder.rungs(H, False, G)[0].module(model.scratch_layer(0))}  # the model's own structure, recomputed
    verdict._values(model)  # the held-out set's kept states, once
    plain = median_seconds(lambda: verdict._values(model, replace=own), runs)  # every layer run: the reference
    whole = median_seconds(lambda: verdict._values(model, replace=every), runs)
    alone = median_seconds(lambda: verdict._values(model, replace={L // 2: every[L // 2]}), runs)
    texts = generated_sentences(verdict.VERDICT["sentences"], verdict.VERDICT["seed"])
    t0 = time.perf_counter()
    _, inputs = next(verdict.layer_input_stream(model, texts))
    stream = time.perf_counter() - t0
    steps = verdict.VERDICT["steps"]
    fits = []
    for _ in range(runs):
        original = model.scratch_layer(0)
        fits.append(uptrain(original, mqa.module(original), inputs, steps).seconds)
    fit = statistics.median(fits)
    shipped = verdict.shipped_verdict(model)
    n = len(ladder.rungs(H, False, G)) - 1  # rungs converted
    runs_every, runs_alone = 2 + 4 * n + n, L * (1 + 2 * n)
    total = runs_every * whole + runs_alone * alone + n * L * fit + n * L * stream / max(L, 1)
    print(
        f"{name} ({L} layers, {n} rungs, {torch.get_num_threads()} threads): held-out set, plain run median "
        f"{plain:.2f} s; every layer converted {whole:.2f} s ({whole / plain:.2f}x); one layer alone {alone:.2f} s "
        f"({alone / plain:.2f}x); one layer's uptraining, {steps} steps, {fit:.1f} s ({fit / plain:.1f}x); the first "
        f"layer's inputs for {len(texts)} sentences {stream:.2f} s. The whole verdict: {runs_every} runs with every "
        f"layer changed, {runs_alone} with one, {n * L} layer fits: about {total / 60:.1f} min"
        + (f" (the shipped one took {shipped.seconds / 60:.1f} min)." if shipped is not None else ".")
    )


def learner_runs(runs: int) -> None:
    """The runs a learner starts and waits for, against 60 s."""
    bert = load_model()
    rung = next(r for r in ladder.rungs(bert.n_heads) if r.name == "MQA")
    inputs = bert.layer_inputs(generated_sentences(), 2)
    for steps in (1000, 2000):
        t = median_seconds(
            lambda s=steps: uptrain(bert.scratch_layer(2), rung.module(bert.scratch_layer(2)), inputs, s), runs, 0
        )
        print(f"What may be shared, uptraining one layer of {bert.name}, {steps} steps: median {t:.1f} s (target < 60)")
    for heads, steps in ((4, 1000), (8, 2000)):
        s = ex.Settings(n_heads=heads, steps=steps)
        t = median_seconds(lambda s=s: ex.run(s, early_stop=False), runs, 0)
        print(
            f"Why many heads, five models, {heads} heads, {steps} steps (no early stop): median {t:.1f} s (target < 60)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--models", nargs="*", default=[DEFAULT_MODEL, DECODER_MODEL])
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)  # the verdict runs on every core (ui.server.all_cores)
    for name in args.models:
        parts(name, args.runs)
    torch.set_num_threads(1)  # a learner's run shares the server: one thread (bench/common.server_threads)
    learner_runs(args.runs)


if __name__ == "__main__":
    main()
