"""Server-side budget of the Subspaces page: one layer's 12 head maps with fidelity at 128 tokens
(<= 0.3 s), the alpha animation of 11 frames (<= 2 s), the 50-sentence pool on first use
(<= 2 s) and again from the cache (instant, measured as the pictures alone); and its figures:
the fidelity of every head on the lesson's sentence, and how many directions the
stacked W^Q and W^K need for 90 % of their energy.

    python bench/bench_subspaces.py [--runs 7]
"""

from __future__ import annotations

import argparse
import time

from common import median_seconds, sentence, server_threads

server_threads()

from mha import plots  # noqa: E402
from mha.analyses import subspaces  # noqa: E402
from mha.analyses.collapse import CollapsePath  # noqa: E402
from mha.lesson.examples import DEFAULT_TEXT  # noqa: E402
from mha.models.catalog import load_model  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    bert = load_model()
    run = bert.attend(sentence(128, 0))
    layer = 2

    def maps():
        m = subspaces.layer_maps(bert, run, layer)
        plots.subspaces.subspace_panels(
            m.queries, m.keys, m.fidelity, run.tokens, "", token=3, weights=m.weights
        ).to_json()

    def frames():
        fr = subspaces.alpha_frames(bert, run, layer, CollapsePath())
        plots.subspaces.subspace_animation([(a, m.queries, m.keys) for a, m in fr], run.tokens, "").to_json()

    texts = subspaces.pool_sentences()
    t0 = time.perf_counter()
    runs = [bert.attend(t) for t in texts]  # what the page caches once per model
    p = subspaces.pool_spaces(bert, [run, *runs], layer)
    pm = subspaces.pool_maps(p)
    first = time.perf_counter() - t0

    def cached_pool():
        q = subspaces.pool_spaces(bert, [run, *runs], layer)
        subspaces.pool_maps(q)

    rows = [
        ("one layer, 12 heads: maps + fidelity + figure", median_seconds(maps, args.runs), 0.3),
        ("alpha animation, 11 frames + figure", median_seconds(frames, args.runs), 2.0),
        (f"pool of {len(texts)} sentences, first use", first, 2.0),
        ("pool, sentences cached (another layer)", median_seconds(cached_pool, args.runs), None),
    ]
    print(f"{run.n_tokens} tokens, {bert.n_heads} heads, median of {args.runs} runs (first use: one run)")
    for name, seconds, budget in rows:
        verdict = "" if budget is None else ("OK" if seconds <= budget else "OVER")
        print(f"{name:<48} {seconds:6.3f} s  budget {budget if budget else '-':>4}  {verdict}")
    figure = plots.subspaces.pool_panels(
        pm.queries, pm.keys, pm.fidelity, p.tokens, subspaces.token_kinds(p.tokens), p.position, p.sentence == 0, ""
    ).to_json()
    print(f"pool figure: {len(figure) / 1e6:.2f} MB of JSON for {len(p.tokens)} tokens")
    lesson = bert.attend(DEFAULT_TEXT)
    fid = [subspaces.layer_maps(bert, lesson, layer).fidelity for layer in range(bert.n_layers)]
    lesson_pool = [
        subspaces.pool_maps(subspaces.pool_spaces(bert, [lesson, *runs], l)).fidelity for l in range(bert.n_layers)
    ]
    spectra = [subspaces.weight_spectra(bert.scratch_layer(layer)) for layer in range(bert.n_layers)]
    q, k = [s.energy_rank("query") for s in spectra], [s.energy_rank("key") for s in spectra]
    print(
        f"the lesson's sentence ({lesson.n_tokens} tokens), every layer and head: fidelity "
        f"{min(f.min() for f in fid):.2f}-{max(f.max() for f in fid):.2f}; pooled with the {len(runs)} bundled "
        f"sentences, within-sentence fidelity {min(f.min() for f in lesson_pool):.2f}-"
        f"{max(f.max() for f in lesson_pool):.2f}"
    )
    print(
        f"directions for 90 % of the energy, stacked over the heads (of {bert.d_model}), layers 0-{bert.n_layers - 1}: "
        f"W^Q {min(q)}-{max(q)}, W^K {min(k)}-{max(k)}, a random matrix {spectra[0].energy_rank('reference')}"
    )
    qr, kr = [s.energy_rank("query_rotated") for s in spectra], [s.energy_rank("key_rotated") for s in spectra]
    print(
        f"the same with each head's own singular values in random directions (the fair baseline): "
        f"W^Q {min(qr)}-{max(qr)}, W^K {min(kr)}-{max(kr)}"
    )


if __name__ == "__main__":
    main()
