"""The tables of *What may be shared* (app_pages/sharing.py), built from the ladder's measures
(mha/analyses/ladder.py): the rungs' structure, each pooling's measures on the learner's sentence beside
their baselines, and a short uptraining's outcome. The page only lays them out."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mha.analyses import ladder

if TYPE_CHECKING:
    from mha.analyses.ladder import Baselines, RungMeasures, UptrainOutcome

KV = "K/V cache per token, fp16 (whole model, as a decoder)"
MEASURES = ("head diversity (JS)", "random maps as sharp (JS)", "attention drift (JS)", "layer output cosine")
SHORT = dict(zip(MEASURES, ("diversity", "random maps", "drift", "layer cosine")))  # the tables' headings


def structure(
    rungs: list[ladder.Rung],
    n_layers: int,
    d_model: int,
    bias: bool,
    d_head: int,
    qk_norm: bool = False,
    windows: tuple[int | None, ...] | None = None,
) -> list[dict]:
    """Each rung's structure, counted from it: what it shares, its projections of Q, K, V, its
    parameters, its K/V cache per token and at the first of ladder.CONTEXTS tokens (d_head, qk_norm,
    windows: the model's own head size, whether it has a query/key norm, and its sliding window per
    layer, Traits.d_head, qk_norm and windows; a sliding layer caches at most its window)."""
    D = d_head  # the model's own (Traits.d_head)
    n = ladder.CONTEXTS[0]
    held = sum(n if w is None else min(n, w) for w in (windows or (None,) * n_layers))  # tokens cached, all layers
    rows = []
    for r in rungs:
        per_layer = ladder.kv_cache_bytes(1, r.heads[1], D, v_heads=r.heads[2])  # one layer, one token
        rows.append(
            {
                "rung": r.name,
                "shared across heads": r.shares,
                "projections of Q, K, V": " / ".join(str(g) for g in r.heads),
                "parameters (layer)": r.parameter_count(d_model, bias, d_head, qk_norm),
                KV: ladder.size(per_layer * n_layers),
                f"at {n:,} tokens": ladder.size(per_layer * held),
            }
        )
    return rows


def measures(kind: str, rows: list[RungMeasures], base: Baselines, emb: str, whole: bool, layer: int, who: str):
    """One pooling's measures on the learner's sentence, rung by rung (with each rung's random-map
    diversity at its own sharpness), then the baselines: the layer's attention removed, every head
    removed, random maps as sharp as the model's."""
    out = [
        {
            "rung": m.rung.name,
            f"head diversity (JS), {kind}": float(f"{m.diversity:.3g}"),
            f"random maps as sharp (JS), {kind}": round(m.random_diversity, 3),
            f"attention drift (JS), {kind}": round(m.drift, 3),
            f"layer output cosine, {kind}": round(m.layer_cosine, 3),
            f"{emb}, {kind}": round(m.sentence_cosine, 3) if whole else None,
        }
        for m in rows
    ]
    out += [
        {
            "rung": name,
            f"layer output cosine, {kind}": None if layer_cos is None or math.isnan(layer_cos) else round(layer_cos, 3),
            f"{emb}, {kind}": round(cos, 3) if whole else None,
        }
        for name, cos, layer_cos in (
            (f"no attention in layer {layer}", base.sentence_cosine, base.layer_cosine),
            ("no head in any layer", base.sentence_cosine_no_heads, None),
        )
        if whole or layer_cos is not None
    ]
    return [
        *out,
        {"rung": f"random maps as sharp as {who}'s", f"head diversity (JS), {kind}": round(base.random_diversity, 3)},
    ]


def uptrained(outcome: UptrainOutcome, before: RungMeasures, after: RungMeasures, removed: float, emb: str) -> list:
    """A short uptraining's outcome, converted against uptrained, with the layer's attention removed beside."""
    n = outcome.held_out_sentences
    gone = "attention removed"

    def row(what: str, a: float, b: float, c: float | None = None, digits: int = 3) -> dict:
        return {
            "measure": what,
            "converted": float(f"{a:.3g}") if digits is None else round(a, digits),
            "uptrained": float(f"{b:.3g}") if digits is None else round(b, digits),
            gone: None if c is None else round(c, 3),
        }

    return [
        row(f"relative error, {n} held-out sentences", outcome.error_before, outcome.error_after),
        row(f"{emb}, {n} held-out sentences", outcome.held_out_before, outcome.held_out_after, outcome.removed_cosine),
        row(f"head diversity, {n} held-out sentences", outcome.diversity_before, outcome.diversity_after, None, None),
        row(f"{emb}, your sentence", before.sentence_cosine, after.sentence_cosine, removed),
        row("head diversity, your sentence", before.diversity, after.diversity, None, None),
        row("relative error, fitted sentences", outcome.fit.before, outcome.fit.after),
    ]


def uptrained_so_far(done: list[tuple[ladder.Rung, UptrainOutcome]], emb: str) -> list[dict]:
    """Every rung uptrained with the same settings, held out."""
    return [
        {
            "rung": r.name,
            "error, converted": round(o.error_before, 3),
            "error, uptrained": round(o.error_after, 3),
            f"{emb}, converted": round(o.held_out_before, 3),
            f"{emb}, uptrained": round(o.held_out_after, 3),
            "diversity, converted": float(f"{o.diversity_before:.3g}"),
            "diversity, uptrained": float(f"{o.diversity_after:.3g}"),
        }
        for r, o in done
    ]
