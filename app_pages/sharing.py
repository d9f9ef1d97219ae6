"""What may be shared: keys and values across heads (MQA, GQA); which projections must differ for heads to differ."""

import streamlit as st

import ui
from mha import collapse, ladder, plots, uptrain

st.title("What may be shared: multi-query and grouped-query attention")
st.markdown(
    "Sharing $W^Q$, $W^K$ and $W^V$ across heads collapses them into one head. Yet the models that run "
    "in production *do* share across heads, only not everything: **multi-query attention** (Shazeer "
    "2019) gives every head one K and one V; **grouped-query attention** (Ainslie et al. 2023) gives "
    "each group of heads its own K and V. Each head keeps its own $W_i^Q$, so each head can still attend "
    "in its own way, while a decoder caches far fewer keys and values per token. Below, one layer of the "
    "real BERT is converted rung by rung (each group's heads mean-pooled into one projection, as Ainslie "
    "et al. do for K and V; a shared projection is one matrix, not equal copies) and measured on your sentence."
)
inp, run, model = ui.page_start()
H, C = model.n_heads, model.d_model
D = C // H
layer, _ = ui.layer_head(run, head=False)

with st.spinner("Converting the layer rung by rung..."):
    measured = ui.cached_ladder(inp, layer)
st.subheader(f"The ladder, layer {layer}")
st.dataframe(
    [
        {
            "rung": m.rung.name,
            "shared across heads": m.rung.shares,
            "projections of Q, K, V": " / ".join(str(g) for g in m.rung.heads),
            "parameters (layer)": m.parameters,
            "K/V cache per token, fp16 (whole model, as a decoder)": f"{m.kv_cache / 1024:.1f} KiB",
            "attention drift (JS)": round(m.drift, 3),
            "head diversity (JS)": float(f"{m.diversity:.3g}"),
            "layer output cosine": round(m.layer_cosine, 3),
            "sentence cosine": round(m.sentence_cosine, 3),
        }
        for m in measured
    ],
    hide_index=True,
)
ui.chart(plots.ladder.ladder_chart(measured))
st.caption(
    "Projections: how many distinct $W^Q$, $W^K$, $W^V$ the layer has (each $d_{model} \\times d_k$); head $i$ "
    "reads its group's. Drift: Jensen-Shannon divergence between a head's new and BERT's own attention, averaged "
    "over heads and tokens. Head diversity: the mean divergence between the rung's heads (Clark et al. 2019's "
    "distance; 0 = every head the same map). Cosines: the attention sub-layer's output per token, and the whole "
    "model's sentence embedding (mean pooling), against BERT's own. No training yet: the rows show the bare "
    "conversion, each group's heads mean-pooled."
)

st.subheader("Which of Q, K, V must differ for heads to differ?")
if H > 1:
    by_heads = {m.rung.heads: m for m in measured}
    bert_div = measured[0].diversity
    identical = [m for m in measured if m.diversity < collapse.SAME_TOLERANCE]
    share_qk = [m for m in measured if m.rung.same_attention]
    mqa, q_only, qk = by_heads[(H, 1, 1)], by_heads[(1, H, H)], by_heads[(1, 1, H)]
    exact = {m.rung.name for m in identical} == {m.rung.name for m in share_qk}
    st.markdown(
        f"On your sentence, BERT's {H} heads in layer {layer} differ by {bert_div:.3f} (mean JS). Sharing **K and "
        f"V** (MQA) leaves {mqa.diversity:.3f} ({mqa.diversity / bert_div:.0%} of it); sharing **Q alone** leaves "
        f"{q_only.diversity:.3f} ({q_only.diversity / bert_div:.0%}). "
        + (
            f"Only the rungs that share **both Q and K** ({', '.join(m.rung.name for m in share_qk)}) make every "
            f"head compute the same map (diversity below {collapse.SAME_TOLERANCE:.0e}): a head's map is "
            r"$\mathrm{softmax}(Q_i K_i^\top / \sqrt{d_k})$, so one distinct $W_i^Q$ *or* one distinct $W_i^K$ per "
            "head is enough to keep the maps apart. How far apart depends on which one stays and on the shared "
            "matrix (here the mean of the heads' slices)."
            if exact
            else "Identical maps (diversity below "
            f"{collapse.SAME_TOLERANCE:.0e}): {', '.join(m.rung.name for m in identical) or 'none'}."
        )
    )
    g1, g2 = st.columns(2)
    ui.chart(
        plots.heads.head_grid(
            ladder.rung_attention(model, run, layer, mqa.rung),
            f"K and V shared (MQA): diversity {mqa.diversity:.3f}",
        ),
        container=g1,
    )
    ui.chart(
        plots.heads.head_grid(
            ladder.rung_attention(model, run, layer, qk.rung), f"Q and K shared: diversity {qk.diversity:.1e}"
        ),
        container=g2,
    )
else:
    st.info("This model has one head per layer: there is nothing to share between heads.")

st.subheader("K/V cache per token, if these were decoders")
shapes = {f"{inp.model} ({model.n_layers} x {H} x {D})": (model.n_layers, H, D), **ladder.REFERENCE_MODELS}
st.dataframe(ladder.cache_table(shapes), hide_index=True)
st.caption(
    "A decoder keeps every past token's K and V of every layer: layers x (K heads + V heads) x $d_k$ values, "
    "2 bytes each in fp16. The fraction is what each keeps of MHA's cache. GQA's group count is the proper "
    "divisor of each model's heads nearest a quarter of them."
)

st.subheader("A short uptraining")
converted = [m.layer_cosine for m in measured[1:]]
st.markdown(
    (
        f"Mean-pooling alone moves the layer: on your sentence its output's cosine to BERT's own is "
        f"{min(converted):.2f} to {max(converted):.2f} across the rungs above. "
        if converted
        else ""
    )
    + "Ainslie et al. then continue training the converted model (5 % of the original pre-training). Here, "
    "much smaller: one layer is fitted to reproduce BERT's own layer output on "
    f"{len(uptrain.generated_sentences()):,} generated sentences (Adam, lr {uptrain.UPTRAIN_LR:g} with cosine "
    f"decay, batches of {uptrain.UPTRAIN_BATCH}), then measured on the bundled hand-written sentences it never "
    "saw. The converted layer keeps its structure while it trains: a shared projection is one matrix, so every "
    "head that reads it moves with it. It is a short layer-wise fit, not the paper's uptraining."
)
choices = [m.rung for m in measured if m.rung.name != "MHA"]
if not choices:
    st.stop()
u1, u2, u3 = st.columns([2, 1, 1])
by_name = {r.name: r for r in choices}
rung = by_name[
    ui.kept(
        "selectbox",
        "Rung to uptrain",
        "sharing_rung",
        u1,
        default=choices[min(1, len(choices) - 1)].name,
        follows=inp.model,
        options=by_name,
        format_func=lambda n: f"{n} (shares {by_name[n].shares})",
    )
]
steps = ui.kept("select_slider", "Steps", "sharing_steps", u2, options=[250, 500, 1000, 2000])
seed = int(ui.kept("number_input", "Seed", "sharing_seed", u3, min_value=0, max_value=9999))
key = (inp.model, layer, rung, steps, seed)
store = ui.UPTRAINS
outcome, go = ui.kept_result(
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
    outcome = ui.kept_run(store, key, fit)
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
before = next(m for m in measured if m.rung == rung)
n_held = outcome.held_out_sentences
st.dataframe(
    [
        {
            "": "relative error on the fitted sentences",
            "converted": round(outcome.fit.before, 3),
            "uptrained": round(outcome.fit.after, 3),
        },
        {
            "": f"sentence cosine, {n_held} held-out sentences (mean)",
            "converted": round(outcome.held_out_before, 3),
            "uptrained": round(outcome.held_out_after, 3),
        },
        {
            "": f"head diversity (JS), {n_held} held-out sentences (mean)",
            "converted": float(f"{outcome.diversity_before:.3g}"),
            "uptrained": float(f"{outcome.diversity_after:.3g}"),
        },
        {
            "": "sentence cosine, your sentence",
            "converted": round(before.sentence_cosine, 3),
            "uptrained": round(after.sentence_cosine, 3),
        },
        {
            "": "head diversity (JS), your sentence",
            "converted": float(f"{before.diversity:.3g}"),
            "uptrained": float(f"{after.diversity:.3g}"),
        },
    ],
    hide_index=True,
)
ui.chart(plots.ladder.loss_curve(outcome.fit.losses, f"{rung.name}, layer {layer}: relative error per step"))
tied = [r.upper() for r in outcome.fit.module.shared_roles]
st.caption(
    f"{rung.name} ({' / '.join(str(g) for g in rung.heads)} projections of Q, K, V), layer {layer}, {steps:,} steps "
    f"in {outcome.fit.seconds:.0f} s. On the {n_held} held-out sentences the mean sentence cosine went from "
    f"{outcome.held_out_before:.3f} (converted) to {outcome.held_out_after:.3f} (uptrained), and the relative "
    f"error on the fitted sentences from {outcome.fit.before:.3f} to {outcome.fit.after:.3f}. "
    + (
        f"{' and '.join(tied)} stayed one matrix each for all {H} heads during training, so every head still "
        f"computes the same map: head diversity {outcome.diversity_after:.1e} after uptraining. Whatever the layer "
        f"fits, it fits through one map read by {rung.heads[2]} value projection(s)."
        if rung.same_attention and outcome.diversity_after < collapse.SAME_TOLERANCE
        else f"Head diversity on the held-out sentences: {outcome.diversity_before:.3f} converted, "
        f"{outcome.diversity_after:.3f} uptrained."
    )
)
done = [(r, store.get((inp.model, layer, r, steps, seed))) for r in choices]
done = [(r, o) for r, o in done if o is not None]
if len(done) > 1:
    st.markdown(f"**Every rung uptrained so far with these settings** (layer {layer}, {steps:,} steps, seed {seed}):")
    st.dataframe(
        [
            {
                "rung": r.name,
                "held-out sentence cosine, converted": round(o.held_out_before, 3),
                "held-out sentence cosine, uptrained": round(o.held_out_after, 3),
                "held-out head diversity, converted": float(f"{o.diversity_before:.3g}"),
                "held-out head diversity, uptrained": float(f"{o.diversity_after:.3g}"),
                "relative error after": round(o.fit.after, 3),
            }
            for r, o in done
        ],
        hide_index=True,
    )
ui.words("K/V cache", "head diversity", "Jensen-Shannon divergence")
