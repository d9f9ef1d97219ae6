"""What may be shared: the ladder's measures for one layer at 128 tokens (<= 1 s), and the
uptraining of layer 5 for every rung (each run <= 60 s, a progress update at least every second),
with the held-out relative error, sentence cosine and head diversity before and after beside the
baseline with the layer's attention removed (its figures), and the ladder's measures on
the lesson's sentence in every layer (which projections must differ), mean-pooled and with the
pooled projections' scale restored.

    python bench/bench_ladder.py [--steps 1000] [--layer 5] [--rescale] [--no-uptrain]
"""

from __future__ import annotations

import argparse
import time

from common import median_seconds, sentence, server_threads, with_progress

server_threads()

from mha.analyses import ladder, subspaces, uptrain  # noqa: E402
from mha.lesson.examples import DEFAULT_TEXT  # noqa: E402
from mha.models.catalog import load_model  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--layer", type=int, default=5)
    parser.add_argument("--rescale", action="store_true", help="uptrain from the conversions with their scale restored")
    parser.add_argument("--no-uptrain", action="store_true", help="only the bare conversions")
    args = parser.parse_args()
    bert = load_model()
    run = bert.attend(sentence(128, 0))
    rungs = ladder.rungs(bert.n_heads)

    def measure_all():
        return [ladder.rung_measures(bert, run, args.layer, r) for r in rungs]

    print(
        f"ladder, {len(rungs)} rungs, layer {args.layer}, 128 tokens: median {median_seconds(measure_all, 5):.3f} s "
        "(budget 1.0)"
    )
    for m in measure_all():
        assert m.parameters == m.rung.parameter_count(bert.d_model), m.rung.name  # the structure's count
        print(
            f"  {m.rung.name:<13} Q/K/V projections {'/'.join(str(g) for g in m.rung.heads):<8} params "
            f"{m.parameters:>7,}  cache {m.kv_cache / 1024:5.1f} KiB  drift "
            f"{m.drift:.3f}  diversity {m.diversity:.3f}  layer cos {m.layer_cosine:.3f}  sentence cos "
            f"{m.sentence_cosine:.3f}"
        )
    lesson = bert.attend(DEFAULT_TEXT)
    for rescale in (False, True):
        kind = "scale restored" if rescale else "mean-pooled"
        print(f"lesson's sentence, layers 0-{bert.n_layers - 1}, no training ({kind}): head diversity | sentence cos")
        for rung in ladder.rungs(bert.n_heads, rescale):
            got = [ladder.rung_measures(bert, lesson, layer, rung) for layer in range(bert.n_layers)]
            div, cos = [m.diversity for m in got], [m.sentence_cosine for m in got]
            print(
                f"  {rung.name:<13} {' '.join(f'{d:.3f}' for d in div)}  (range {min(div):.3f}-{max(div):.3f}) | "
                f"{' '.join(f'{c:.3f}' for c in cos)}"
            )
    base = [ladder.baselines(bert, lesson, layer) for layer in range(bert.n_layers)]
    print(f"  {'no attention in the layer':<26} sentence cos {' '.join(f'{b.sentence_cosine:.3f}' for b in base)}")
    print(f"  {'no head in any layer':<26} sentence cos {base[0].sentence_cosine_no_heads:.3f}")
    if args.no_uptrain:
        return
    rungs = ladder.rungs(bert.n_heads, args.rescale)
    t0 = time.perf_counter()
    inputs = bert.layer_inputs(uptrain.generated_sentences(), args.layer)
    held_out = [bert.attend(t) for t in subspaces.pool_sentences()]
    print(
        f"inputs: {inputs[0].shape[0]} generated sentences, padded to {inputs[0].shape[1]} tokens, and "
        f"{len(held_out)} held-out ones: {time.perf_counter() - t0:.1f} s"
    )
    print(
        f"uptraining layer {args.layer} ({'scale restored' if args.rescale else 'mean-pooled'}), {args.steps} steps, "
        f"on the {len(held_out)} held-out sentences (mean), then on the fitted ones:"
    )
    for rung in rungs[1:]:
        out, _, gap, _ = with_progress(
            lambda progress, rung=rung: ladder.uptrain_rung(
                bert, args.layer, rung, inputs, held_out, args.steps, progress=progress
            )
        )
        verdict = "OK" if out.fit.seconds <= 60 and gap <= 1.0 else "OVER"
        print(
            f"  {rung.name:<13} ({'/'.join(str(g) for g in rung.heads)}, {out.fit.module.num_parameters():,} "
            f"parameters) held out: relative error {out.error_before:.3f} -> {out.error_after:.3f}, sentence cosine "
            f"converted {out.held_out_before:.3f} -> uptrained {out.held_out_after:.3f} (layer removed "
            f"{out.removed_cosine:.3f}); head diversity {out.diversity_before:.3g} -> {out.diversity_after:.3g}; "
            f"fitted relative error {out.fit.before:.3f} -> {out.fit.after:.3f}; {out.fit.seconds:.1f} s, "
            f"longest gap between "
            f"updates {gap:.2f} s  {verdict}"
        )


if __name__ == "__main__":
    main()
