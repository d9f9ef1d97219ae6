"""What may be shared: keys and values across heads (MQA, GQA); which projections must differ for heads to differ."""

import streamlit as st

import ui
from mha import plots
from mha.analyses import collapse, groups, ladder, subspaces, uptrain
from mha.analyses.groups import group_ranges
from mha.lesson import answers, recap
from mha.models import structures

POOLINGS = ("mean-pooled", "scale restored")  # a rung to uptrain starts from the plain mean, or rescaled

st.title("What may be shared: multi-query and grouped-query attention")
st.markdown(
    "Sharing $W^Q$, $W^K$ and $W^V$ across heads collapses them into one head. Yet the models that run "
    "in production *do* share across heads, only not everything: **multi-query attention** (Shazeer "
    "2019) gives every head one K and one V; **grouped-query attention** (Ainslie et al. 2023) gives "
    "each group of heads its own K and V. Each head keeps its own $W_i^Q$, so each head can still attend "
    "in its own way, while a decoder caches far fewer keys and values per token. Below, one layer of the "
    "real model is converted rung by rung (each group's heads mean-pooled into one projection, as Ainslie "
    "et al. do for K and V; a shared projection is one matrix, not equal copies) and measured on your sentence. "
    "The mean of several slices is shorter than one slice (about $1/\\sqrt{g}$ for $g$ unrelated ones), which "
    "shrinks every score, so each rung is also converted with its pooled projections rescaled to their group's "
    "typical length: comparing the two separates what the plain mean's smaller scale does to the heads from what "
    "sharing itself does. Neither is a trained layer."
)
inp, run, model = ui.page_start()
H, C, G, who = model.n_heads, model.d_model, model.traits.kv_groups, model.traits.who
D = C // H
emb = collapse.final_key(model.traits).replace(" embedding", "")  # collapse.final_cosine
if G < H:
    st.info(
        f"{who} is already a grouped-query model: its {H} query heads share {G} K/V projections (GQA-{G}, heads "
        f"{group_ranges(H, G)}). Mean-pooling cannot split a group again, so its ladder starts at GQA-{G} and goes "
        "down to multi-query attention and a shared Q.",
        icon=":material/share:",
    )
layer, _ = ui.layer_head(run, head=False)

st.header(f"The ladder, layer {layer}")
rungs = ladder.rungs(H, False, G)
inside = ui.ladder_inside(inp, run, layer, "sharing_inside")
whole = inside and ui.whole_model_runs(
    model,
    run,
    ui.ladder_runs(inp.model, layer),
    ui.ladder_ready(inp, layer),
    "sharing_whole",
    f"the {emb}s of the rungs and baselines",
)
with st.spinner("Converting the layer rung by rung..."):
    base = ui.cached_baselines(inp, layer, whole)
    measured = ui.cached_ladder(inp, layer, whole=whole) if inside else []
    rescaled = ui.cached_ladder(inp, layer, True, whole=whole) if inside else []
bias = model.scratch_layer(layer).q_proj.bias is not None
KV = "K/V cache per token, fp16 (whole model, as a decoder)"
structure = [  # each rung's structure, counted from it (the same as its built module's: tests/test_ladder.py)
    {
        "rung": r.name,
        "shared across heads": r.shares,
        "projections of Q, K, V": " / ".join(str(g) for g in r.heads),
        "parameters (layer)": r.parameter_count(C, bias),
        KV: f"{ladder.kv_cache_bytes(model.n_layers, r.heads[1], D, v_heads=r.heads[2]) / 1024:g} KiB",
    }
    for r in rungs
]
st.dataframe(
    structure,
    hide_index=True,
    height="content",
    column_config={
        "parameters (layer)": st.column_config.NumberColumn(format="%d"),
        KV: st.column_config.TextColumn("K/V cache per token", help=KV),
    },
)
MEASURES = ("head diversity (JS)", "attention drift (JS)", "layer output cosine", emb)  # each pooling's columns


def measures_table(kind: str, rows: list[ladder.RungMeasures]) -> list[dict]:
    """One pooling's measures on the learner's sentence, rung by rung, then the two baselines."""
    out = [
        {
            "rung": m.rung.name,
            f"head diversity (JS), {kind}": float(f"{m.diversity:.3g}"),
            f"attention drift (JS), {kind}": round(m.drift, 3),
            f"layer output cosine, {kind}": round(m.layer_cosine, 3),
            f"{emb}, {kind}": round(m.sentence_cosine, 3) if whole else None,
        }
        for m in rows
    ]
    out += [
        {
            "rung": name,
            f"layer output cosine, {kind}": round(layer_cos, 3) if layer_cos is not None else None,
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


if inside:  # one table per pooling: every column on a projector's screen, every row without scrolling
    for kind, rows in (("mean-pooled", measured), ("scale restored", rescaled)):
        st.dataframe(
            measures_table(kind, rows),
            hide_index=True,
            height="content",
            placeholder="—",
            column_config={
                "rung": st.column_config.TextColumn(f"rung ({kind})", pinned=True, width=210),
                **{f"{name}, {kind}": name for name in MEASURES},  # the table's title says the pooling
            },
        )
    ui.chart(plots.ladder.ladder_chart(measured, rescaled, base, emb, who))
st.caption(
    "Projections: how many distinct $W^Q$, $W^K$, $W^V$ the layer has (each $d_{model} \\times d_k$); head $i$ "
    "reads its group's. Mean-pooled: each group's slices averaged (Ainslie et al. 2023); scale restored: that mean "
    f"made as long as the group's typical slice. Drift: Jensen-Shannon divergence between a head's new and {who}'s "
    "own attention, averaged over heads and tokens. Head diversity: the mean divergence between the rung's heads "
    "(Clark et al. 2019's distance; 0 = every head the same map). Cosines: the attention sub-layer's output per "
    + (
        "token, and the whole model's sentence embedding (mean pooling)"
        if emb.startswith("sentence")
        else "token, and the whole model's last layer output, token by token, before the final "
        f"{model.traits.norm} (mean cosine; a decoder pools "
        "nothing, and its first token's state is many times longer than the others')"
    )
    + f", against {who}'s own. Baselines: the same "
    "measures with every head of the layer, or of the model, removed (outputs zeroed before $W^O$), and the "
    f"diversity of random maps exactly as sharp as {who}'s (each row's weights shuffled over its keys). No training "
    "yet: the rows show the bare conversion."
)

beat = [
    f"{m.rung.name} ({m.rung.pooling})"
    for pair in zip(measured[1:], rescaled[1:])
    for m in pair
    if whole and m.sentence_cosine <= base.sentence_cosine
]
if beat:
    st.warning(
        f"On your sentence, converted without training, {', '.join(beat)} {'keeps' if len(beat) == 1 else 'keep'} "
        f"no more of the {'sentence embedding' if emb.startswith('sentence') else 'final states'} "
        f"than removing layer {layer}'s attention altogether (cosine {base.sentence_cosine:.3f}): a bare conversion "
        "is not yet a working layer. Uptraining (below) is what makes one."
    )

st.header("Which of Q, K, V must differ for heads to differ?")
if not inside:
    st.info("The rungs' measures above answer it: they wait for the button.", icon=":material/timer:")
elif H > 1:
    by_heads = {m.rung.heads: m for m in measured}
    by_heads_scaled = {m.rung.heads: m for m in rescaled}
    bert_div = measured[0].diversity
    identical = [m for m in measured if m.diversity < collapse.SAME_TOLERANCE]
    share_qk = [m for m in measured if m.rung.same_attention]
    mqa, q_only, qk = by_heads[(H, 1, 1)], by_heads[(1, G, G)], by_heads[(1, 1, G)]
    mqa_s, q_only_s = by_heads_scaled[(H, 1, 1)], by_heads_scaled[(1, G, G)]
    exact = {m.rung.name for m in identical} == {m.rung.name for m in share_qk}
    st.markdown(
        f"On your sentence, {who}'s {H} heads in layer {layer} differ by {bert_div:.3f} (mean JS, nats; random maps "
        f"exactly as sharp as theirs differ by {base.random_diversity:.3f}, identical maps by 0). Sharing **K and "
        f"V** (MQA) leaves {mqa_s.diversity:.3f} ({mqa_s.diversity / bert_div:.0%} of it) when the pooled K and V keep "
        f"a slice's length, and {mqa.diversity:.3f} ({mqa.diversity / bert_div:.0%}) with the plain mean; sharing **Q "
        f"alone** leaves {q_only_s.diversity:.3f} ({q_only_s.diversity / bert_div:.0%}), or {q_only.diversity:.3f} "
        f"({q_only.diversity / bert_div:.0%}) with the plain mean. Diversity counts how far apart the heads are, "
        "not whether they still attend as before: each MQA head's map drifts "
        f"{mqa_s.drift:.3f} from its own map in {who} ({mqa.drift:.3f} with the plain mean), "
        f"{mqa_s.drift / bert_div:.0%} of the distance between two of {who}'s heads. "
        + (
            "Most of what the plain mean takes from MQA's diversity is scale: its shorter K shrinks every score, and "
            "the maps flatten towards one another. "
            if mqa_s.diversity - mqa.diversity > 0.5 * (bert_div - mqa.diversity)
            else ""
        )
        + (
            f"Only the rungs that share **both Q and K** ({', '.join(m.rung.name for m in share_qk)}) make every "
            f"head compute the same map (diversity below {collapse.SAME_TOLERANCE:.0e}): a head's map is "
            r"$\mathrm{softmax}(Q_i K_i^\top / \sqrt{d_k})$, so a $W^Q$ of its own *or* a $W^K$ of its own for "
            "each head is enough to keep the maps apart."
            if exact
            else "Identical maps (diversity below "
            f"{collapse.SAME_TOLERANCE:.0e}): {', '.join(m.rung.name for m in identical) or 'none'}."
        )
    )
    st.markdown(recap.further(by_heads, by_heads_scaled, H, who, emb, G))
    g1, g2 = st.columns(2)
    ui.chart(
        plots.heads.head_grid(
            ladder.rung_attention(model, run, layer, mqa_s.rung),
            f"K and V shared (MQA, scale restored): diversity {mqa_s.diversity:.3f}",
        ),
        container=g1,
    )
    qk_s = by_heads_scaled[(1, 1, G)]
    ui.chart(
        plots.heads.head_grid(
            ladder.rung_attention(model, run, layer, qk_s.rung),
            f"Q and K shared (scale restored): diversity {answers.small(qk_s.diversity)}",
        ),
        container=g2,
    )
else:
    st.info("This model has one head per layer: there is nothing to share between heads.")

if 1 < G < H:
    st.header("Do heads that share one K and V still attend differently?")
    mine_within, mine_across = groups.within_across(run.attentions, layer, H, G)
    with st.spinner(f"Running the {len(subspaces.pool_sentences())} bundled sentences (once)..."):
        study = ui.cached_group_diversity(inp.model)
    low = int((study.rank <= 0.05).sum())
    st.markdown(
        f"Two query heads of one group read the same keys and values: only their own $W_i^Q$ can set them apart. On "
        f"your sentence, in layer {layer}, two heads of one group differ by {mine_within:.3f} (mean JS, nats) and two "
        f"heads of different groups by {mine_across:.3f}. Over the {study.texts} bundled sentences, heads of one "
        f"group are more alike than heads of two groups in {study.layers_more_alike} of {model.n_layers} layers "
        f"(mean over layers {study.within.mean():.3f} against {study.across.mean():.3f}): within a group they still "
        f"differ, {study.within.mean() / study.across.mean():.0%} as much as two heads of different groups. Among all "
        f"{study.n_partitions} ways to cut {H} heads into {G} groups of {H // G}, the model's own grouping is in the "
        f"most alike 5% in {low} layers ({0.05 * model.n_layers:.1f} expected if the grouping had nothing to do with "
        f"the maps; median rank {study.median_rank:.2f}, where 0.5 would be an ordinary cut)."
    )
    ui.chart(plots.ladder.group_chart(study.within, study.across, study.rank, study.texts))
    st.caption(
        "A query that can read only itself (a causal map's first row) is left out: every head gives it weight 1. "
        "Rank: the share of all equal-size partitions of the heads whose same-group pairs are at least as alike as "
        "the model's (small: the model's groups are unusually alike)."
    )

st.header("K/V cache per token, as real models are built")
built = [(f"{inp.model} (on screen)", model.n_layers, H, G, D)]
built += [(s.name, s.n_layers, s.n_heads, s.kv_heads, s.d_head) for s in structures.references() if s.name != inp.model]
st.dataframe(
    ladder.built_cache_table(built),
    hide_index=True,
    column_config={  # short headings: the long ones hid the last column on a projector
        "K/V heads per layer": st.column_config.TextColumn("K/V heads", help="K/V heads per layer"),
        "K/V cache per token, as built": st.column_config.TextColumn(
            "cache, as built", help="K/V cache per token (fp16), as the model is built"
        ),
        "with a K and V per head": st.column_config.TextColumn(
            "a K, V per head", help="K/V cache per token (fp16) with a K and V per query head"
        ),
    },
)
st.caption(
    "What generation reads for every new token, on real structures (GPT-2 small from Transformers' GPT2Config, "
    "Radford et al. 2019; SmolLM2-135M from its config.json, once fetched): "
    + "; ".join(
        f"{name} keeps {kv} K/V heads for its {heads} query heads"
        + (f", 1/{heads // kv} of the cache a K and V per head would need" if kv < heads else ", one per head")
        for name, _, heads, kv, _ in built
    )
    + (". That saving is the point of grouped-query attention" if any(kv < h for _, _, h, kv, _ in built) else "")
    + ". Layers x (K heads + V heads) x $d_k$ values, 2 bytes each (fp16)."
)

st.header("K/V cache per token, if these were decoders")
shapes = {f"{inp.model} ({model.n_layers} x {H} x {D})": (model.n_layers, H, D), **ladder.REFERENCE_MODELS}
st.dataframe(ladder.cache_table(shapes), hide_index=True)
st.caption(
    "A decoder keeps every past token's K and V of every layer: layers x (K heads + V heads) x $d_k$ values, "
    "2 bytes each in fp16. The fraction is what each keeps of MHA's cache. GQA's group count is the proper "
    "divisor of each model's heads nearest a quarter of them."
)

st.header("A short uptraining")
converted = [m.layer_cosine for m in measured[1:]]
st.markdown(
    (
        f"Mean-pooling alone moves the layer: on your sentence its output's cosine to {who}'s own is "
        f"{min(converted):.2f} to {max(converted):.2f} across the rungs above. "
        if converted
        else ""
    )
    + f"Removing the layer's attention altogether gives {base.layer_cosine:.2f}. "
    + "Ainslie et al. then continue training the converted model (5 % of the original pre-training). Here, "
    f"much smaller: one layer is fitted to reproduce {who}'s own layer output on "
    f"{len(uptrain.generated_sentences()):,} generated sentences (Adam, lr {uptrain.UPTRAIN_LR:g} with cosine "
    f"decay, batches of {uptrain.UPTRAIN_BATCH}), then measured on the bundled hand-written sentences it never "
    "saw. The converted layer keeps its structure while it trains: a shared projection is one matrix, so every "
    "head that reads it moves with it. It is a short layer-wise fit, not the paper's uptraining."
)
u1, u0, u2, u3 = st.columns([2, 1.4, 1, 1])
about = "The plain mean of each group's slices (Ainslie et al. 2023), or that mean rescaled to a slice's length."
pooling = ui.setting_widget("radio", "Start from", "sharing_pooling", u0, options=POOLINGS, help=about)
choices = [r for r in ladder.rungs(H, pooling == POOLINGS[1], G) if r.name != "MHA"]
if not choices:
    st.stop()
by_name = {r.name: r for r in choices}
rung = by_name[
    ui.setting_widget(
        "selectbox",
        "Rung to uptrain",
        "sharing_rung",
        u1,
        default=choices[min(1, len(choices) - 1)].name,
        follows=inp.model,
        options=by_name,
        format_func={n: f"{n} (shares {r.shares})" for n, r in by_name.items()}.__getitem__,
    )
]
steps = ui.setting_widget("select_slider", "Steps", "sharing_steps", u2, options=[250, 500, 1000, 2000])
seed = int(ui.setting_widget("number_input", "Seed", "sharing_seed", u3, min_value=0, max_value=9999))
key = (inp.model, layer, rung, steps, seed)
store = ui.UPTRAINS
outcome, go = ui.stored_result_button(
    store,
    key,
    "Uptrain",
    "sharing_train",
    "Results are kept per settings for everyone: a second visit shows them at once.",
)
bar = st.empty()
if outcome is None and go:

    def fit() -> ladder.UptrainOutcome:
        bar.progress(0.0, text="Preparing the sentences...")
        return ladder.uptrain_rung(
            model,
            layer,
            rung,
            ui.layer_inputs(inp.model, layer),
            ui.cached_pool_runs(inp.model),
            steps,
            seed,
            lambda p: bar.progress(p.fraction, text=f"step {p.step} of {p.steps}: relative error {p.loss:.3f}"),
        )

    if store.busy(key):
        bar.info("Another session is running this uptraining: waiting for its result...")
    outcome = ui.shared_run(store, key, fit, ui.queue_place(bar))
    bar.empty()
if outcome is None:
    fits = [o.fit for k, o in store.entries() if k[0] == inp.model and o.fit.losses]
    rate = uptrain.seconds_per_step(fits)
    st.info(
        f"Press **Uptrain**: about {steps * rate:.0f} s on this server, from the {len(fits)} run(s) it has kept."
        if rate is not None
        else "Press **Uptrain**: a progress bar follows the steps as they run."
    )
    st.stop()
after = ladder.rung_measures(model, run, layer, rung, outcome.fit.module)
before = ladder.rung_measures(model, run, layer, rung)  # with its sentence cosine, whatever the ladder showed
base = ui.cached_baselines(inp, layer)
n_held = outcome.held_out_sentences
st.dataframe(
    [
        {
            "": f"relative error of the layer's output, {n_held} held-out sentences",
            "converted": round(outcome.error_before, 3),
            "uptrained": round(outcome.error_after, 3),
            "layer's attention removed": None,
        },
        {
            "": f"{emb}, {n_held} held-out sentences (mean)",
            "converted": round(outcome.held_out_before, 3),
            "uptrained": round(outcome.held_out_after, 3),
            "layer's attention removed": round(outcome.removed_cosine, 3),
        },
        {
            "": f"head diversity (JS), {n_held} held-out sentences (mean)",
            "converted": float(f"{outcome.diversity_before:.3g}"),
            "uptrained": float(f"{outcome.diversity_after:.3g}"),
            "layer's attention removed": None,
        },
        {
            "": f"{emb}, your sentence",
            "converted": round(before.sentence_cosine, 3),
            "uptrained": round(after.sentence_cosine, 3),
            "layer's attention removed": round(base.sentence_cosine, 3),
        },
        {
            "": "head diversity (JS), your sentence",
            "converted": float(f"{before.diversity:.3g}"),
            "uptrained": float(f"{after.diversity:.3g}"),
            "layer's attention removed": None,
        },
        {
            "": "relative error on the sentences it was fitted on",
            "converted": round(outcome.fit.before, 3),
            "uptrained": round(outcome.fit.after, 3),
            "layer's attention removed": None,
        },
    ],
    hide_index=True,
)
ui.chart(plots.ladder.loss_curve(outcome.fit.losses, f"{rung.name}, layer {layer}: relative error per step"))
tied = [r.upper() for r in outcome.fit.module.shared_roles]
st.caption(
    f"{rung.name} ({' / '.join(str(g) for g in rung.heads)} projections of Q, K, V, {rung.pooling}), layer {layer}, "
    f"{steps:,} steps in {outcome.fit.seconds:.0f} s. On the {n_held} held-out sentences the relative error of the "
    f"layer's output went from {outcome.error_before:.3f} (converted) to {outcome.error_after:.3f} (uptrained) and the "
    f"mean {emb} from {outcome.held_out_before:.3f} to {outcome.held_out_after:.3f}; with the layer's "
    f"attention removed it is {outcome.removed_cosine:.3f}. On the sentences it was fitted on the error went from "
    f"{outcome.fit.before:.3f} to {outcome.fit.after:.3f}"
    + (
        f" (held out it is {outcome.error_after / outcome.fit.after:.0f} times larger: the fit does not carry over "
        "whole)"
        if outcome.fit.after > 0 and outcome.error_after > 2 * outcome.fit.after
        else ""
    )
    + ". "
    + (
        f"{' and '.join(tied)} stayed one matrix each for all {H} heads during training, so every head still "
        f"computes the same map: head diversity {answers.small(outcome.diversity_after)} after uptraining. Whatever "
        f"the layer fits, it fits through one map read by {rung.heads[2]} value projection(s)."
        if rung.same_attention and outcome.diversity_after < collapse.SAME_TOLERANCE
        else f"Head diversity on the held-out sentences: {outcome.diversity_before:.3f} converted, "
        f"{outcome.diversity_after:.3f} uptrained."
    )
)
done = [(r, store.get((inp.model, layer, r, steps, seed))) for r in choices]
done = [(r, o) for r, o in done if o is not None]
if len(done) > 1:
    st.markdown(
        f"**Every rung uptrained so far with these settings** (layer {layer}, {rung.pooling}, {steps:,} steps, seed "
        f"{seed}; held-out {emb} with the layer's attention removed: {outcome.removed_cosine:.3f}):"
    )
    st.dataframe(
        [
            {
                "rung": r.name,
                "held-out relative error, converted": round(o.error_before, 3),
                "held-out relative error, uptrained": round(o.error_after, 3),
                f"held-out {emb}, converted": round(o.held_out_before, 3),
                f"held-out {emb}, uptrained": round(o.held_out_after, 3),
                "held-out head diversity, converted": float(f"{o.diversity_before:.3g}"),
                "held-out head diversity, uptrained": float(f"{o.diversity_after:.3g}"),
                "fitted relative error, uptrained": round(o.fit.after, 3),
            }
            for r, o in done
        ],
        hide_index=True,
    )
ui.words(
    "multi-query and grouped-query",
    "K/V cache",
    "uptraining",
    "attention drift",
    "rescaled mean",
    "head diversity",
    "Jensen-Shannon divergence",
    "mean pooling",
)
