"""What may be shared: keys and values across heads (MQA, GQA); which projections must differ for heads to differ."""

import streamlit as st

import ui
from mha import plots
from mha.analyses import collapse, export, groups, ladder, subspaces, uptrain
from mha.analyses.groups import group_ranges
from mha.lesson import answers, recap, sharing_tables, side_by_side_words, structure_words
from mha.lesson import verdict as words
from mha.models import structures
from mha.studies import side_by_side

POOLINGS = ("mean-pooled", "scale restored")  # a rung to uptrain starts from the plain mean, or rescaled

st.title("What may be shared: multi-query and grouped-query attention")
st.markdown(
    "Sharing $W^Q$, $W^K$ and $W^V$ across heads collapses them into one head. Yet the models that run "
    "in production *do* share across heads, only not everything: **multi-query attention** (Shazeer "
    "2019) gives every head one K and one V; **grouped-query attention** (Ainslie et al. 2023) gives "
    "each group of heads its own K and V. Each head keeps its own $W_i^Q$, so each head can still attend "
    "in its own way, while a decoder caches far fewer keys and values per token. Below, the real model is "
    "converted rung by rung (each group's heads mean-pooled into one projection, as Ainslie et al. do for K and V; "
    "a shared projection is one matrix, not equal copies): first in every layer, scored on the model's own task on "
    "held-out data, then one layer on your sentence. The mean of several slices is shorter than one slice (about "
    "$1/\\sqrt{g}$ for $g$ unrelated ones), which shrinks every score, so each rung is also converted with its "
    "pooled projections rescaled to their group's typical length."
)
inp, run, model = ui.page_start()
H, C, G, who = model.n_heads, model.d_model, model.traits.kv_groups, model.traits.who
D = model.traits.d_head
emb = collapse.final_key(model.traits).replace(" embedding", "")  # collapse.final_cosine
if G == 1 < H:
    st.info(
        f"{who} is already a multi-query model: its {H} query heads share one K/V projection (MQA, Shazeer 2019). "
        "Mean-pooling cannot split it again, so its ladder starts at MQA, and one rung lies below: shared Q/K/V, "
        "the only projection left to share being $W^Q$.",
        icon=":material/share:",
    )
elif G < H:
    st.info(
        f"{who} is already a grouped-query model: its {H} query heads share {G} K/V projections (GQA-{G}, heads "
        f"{group_ranges(H, G)}). Mean-pooling cannot split a group again, so its ladder starts at GQA-{G} and goes "
        "down to multi-query attention and a shared Q.",
        icon=":material/share:",
    )
layer, _ = ui.layer_head(run, head=False)

st.header("The structures")
rungs = ladder.rungs(H, False, G)
bias = model.scratch_layer(layer).q_proj.bias is not None
st.dataframe(  # each rung's structure, counted from it (the same as its built module's: tests/test_ladder.py)
    sharing_tables.structure(rungs, model.n_layers, C, bias, D, model.traits.qk_norm is not None, model.traits.windows),
    hide_index=True,
    height="content",
    column_config={
        "parameters (layer)": st.column_config.NumberColumn(format="%d"),
        sharing_tables.KV: st.column_config.TextColumn("K/V cache per token", help=sharing_tables.KV),
    },
)
st.caption(
    "A decoder keeps every past token's K and V of every layer, and generation reads the whole cache again for "
    f"every new token: at {ladder.CONTEXTS[0]:,} tokens of context, that is the last column, read once per token "
    "it writes. Layers x (K heads + V heads) x $d_k$ values, 2 bytes each (fp16)"
    + (
        f"; each of the {len(model.traits.sliding_layers)} sliding-window layers keeps at most its "
        f"{model.traits.widest_window:,} tokens."
        if model.traits.sliding_layers
        else "."
    )
)

st.header("The verdict: what sharing costs the model's own task")
verdict = ui.verdict_or_button(model, "sharing_verdict")
if verdict is not None:
    st.markdown(
        f"Every layer converted at once, as Ainslie et al. (2023) convert a checkpoint, and scored on "
        f"{words.held_out(verdict)}: data no conversion was fitted or tuned on. Beside each rung: the same structure "
        "with random projections of the same shapes and norms (a floor), every head of every layer removed, and the "
        f"rung uptrained: {words.budget(verdict)}."
    )
    st.table(words.table(verdict), hide_index=True)  # wraps: every column on a projector and a phone
    st.caption(f"Each cell: {words.score_name(verdict)} with every layer changed.")
    ui.chart(
        plots.ladder.verdict_chart(
            words.interval_rows(verdict),
            words.score_name(verdict) + ("" if words.higher_is_better(verdict) else ", lower is better"),
            f"{who}, every layer converted: each rung's score and its 90% interval",
        )
    )
    st.markdown(
        f"Converted without training, best first: {words.chain(verdict, words.order_rows(verdict))}. "
        f"Rescaled: {words.chain(verdict, words.order_rows(verdict, pooling=words.SCALED))}."
    )
    st.caption(words.chain_key(verdict))
    if G == 1 < H and model.traits.qk_norm is not None:  # only W^Q is pooled, and its norm undoes a rescaling
        st.markdown(
            f"The two poolings score alike on {who}: with one K and one V already, only $W^Q$ is pooled, and the "
            "RMS norm on every query divides out any rescaling of it."
        )
    st.markdown(words.against_removal(verdict))
    st.markdown(words.uptrained_words(verdict) + " " + words.contrast(verdict))
    st.markdown(words.kept_words(verdict))
    st.download_button(
        "The verdict, every variant with its interval (.csv)",
        export.rows_csv(words.interval_rows(verdict)),
        file_name=f"verdict_{inp.model}.csv",
        mime="text/csv",
        on_click="ignore",
    )
    if verdict.task == "next-token":
        ui.scored_texts_download()
    st.subheader(f"Layer {layer} alone")
    st.markdown(words.alone_words(verdict, layer))
    st.dataframe(words.alone_table(verdict, layer), hide_index=True, height="content")

three = side_by_side.shipped()
if three:  # about three named models, whichever is picked (the other pages speak of the picked one only)
    box = st.container(key="three_models")
    box.header("Three real models side by side")
    box.markdown(
        "One model with a K and V per head, one with K/V groups, one with a single K/V head, each measured beside "
        f"its own baselines on the bundled {three[0].texts} pool sentences, with its own verdict (as above)."
    )
    box.table(side_by_side_words.table(three), hide_index=True)
    for line in side_by_side_words.words(three):
        box.markdown(line)

st.header(f"Inside layer {layer}, on your sentence")
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
if inside:  # one table per pooling: every column on a projector's screen, every row without scrolling
    for kind, rows in (("mean-pooled", measured), ("scale restored", rescaled)):
        st.dataframe(
            sharing_tables.measures(kind, rows, base, emb, whole, layer, who),
            hide_index=True,
            height="content",
            placeholder="—",
            column_config={  # short headings, the full ones in help: every column on a projector's screen
                "rung": st.column_config.TextColumn(f"rung ({kind})", pinned=True, width=180),
                **{
                    f"{name}, {kind}": st.column_config.NumberColumn(short, help=f"{name}, {kind}")
                    for name, short in (*sharing_tables.SHORT.items(), (emb, emb.replace("embedding ", "")))
                },
            },
        )
    ui.chart(plots.ladder.ladder_chart(measured, rescaled, base, emb, who))
    st.markdown(recap.residual(base, layer, emb, model.traits.pre_norm))
st.caption(
    "Drift: Jensen-Shannon divergence between a head's new and "
    f"{who}'s own attention, averaged over heads and tokens. Head diversity: the mean divergence between the rung's "
    "heads (Clark et al. 2019's distance; 0 = every head the same map); random maps as sharp: the same for each "
    "row's weights shuffled over its keys, at the rung's own sharpness. Cosines: the attention sub-layer's output per "
    + (
        "token, and the whole model's sentence embedding (mean pooling)"
        if emb.startswith("sentence")
        else "token, and the whole model's last layer output, token by token, before the final "
        f"{model.traits.norm} (mean cosine; a decoder pools nothing)"
    )
    + f", against {who}'s own. Baselines: the same measures with every head of the layer, or of the model, removed "
    "(outputs zeroed before $W^O$). No training: the rows show the bare conversion."
)

st.header("Which of Q, K, V must differ for heads to differ?")
if not inside:
    st.info("The rungs' measures above answer it: they wait for the button.", icon=":material/timer:")
elif H > 1:
    by_heads = {m.rung.heads: m for m in measured}
    by_heads_scaled = {m.rung.heads: m for m in rescaled}
    mqa_s, qk_s = by_heads_scaled[(H, 1, 1)], by_heads_scaled[(1, 1, G)]
    st.markdown(recap.which_differ(measured, rescaled, base, who, layer, structure_words.map_tex(model.traits)))
    q_alone = (by_heads_scaled[(1, G, G)], by_heads[(1, G, G)])
    st.markdown(recap.q_only(q_alone[0], measured[0], who) or recap.q_only(q_alone[1], measured[0], who))
    st.markdown(recap.further(verdict, by_heads, by_heads_scaled, H, who, G))
    g1, g2 = st.columns(2)
    ui.chart(
        plots.heads.head_grid(
            ladder.rung_attention(model, run, layer, mqa_s.rung),
            f"K and V shared (MQA, scale restored): diversity {mqa_s.diversity:.3f}",
        ),
        container=g1,
    )
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
own = structures.Structure(f"{inp.model} (on screen)", model.n_layers, H, G, D, model.traits.windows)
built = [own, *(s for s in structures.references() if s.name != inp.model)]
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
st.caption(ladder.built_cache_words(built))

st.header("K/V cache per token, if these were decoders")
shapes = {f"{inp.model} ({model.n_layers} x {H} x {D})": (model.n_layers, H, D), **ladder.REFERENCE_MODELS}
st.dataframe(ladder.cache_table(shapes), hide_index=True)
st.caption(
    "A decoder keeps every past token's K and V of every layer: layers x (K heads + V heads) x $d_k$ values, "
    "2 bytes each in fp16. The fraction is what each keeps of MHA's cache. GQA's group count is the proper "
    "divisor of each model's heads nearest a quarter of them."
)

st.header("A short uptraining, one layer")
converted = [m.layer_cosine for m in measured[1:]]
st.markdown(
    (
        f"Mean-pooling alone moves the layer: on your sentence its output's cosine to {who}'s own is "
        + (
            f"{min(converted):.2f} to {max(converted):.2f} across the rungs above. "
            if len(converted) > 1
            else f"{converted[0]:.2f} for {measured[1].rung.name}, the one rung below it. "
        )
        if converted
        else ""
    )
    + (
        f"Removing the layer's attention altogether gives {base.layer_cosine:.2f}. "
        if base.layer_cosine == base.layer_cosine
        else f"Removing the layer's attention altogether leaves no output at all ({who}'s $W^O$ has no bias). "
    )
    + "The verdict above uptrains every "
    "layer of every rung; here you uptrain one layer yourself: it is fitted to reproduce "
    f"{who}'s own layer output on {len(uptrain.generated_sentences()):,} generated sentences (Adam, lr "
    f"{uptrain.UPTRAIN_LR:g} with cosine decay, batches of {uptrain.UPTRAIN_BATCH}), then measured on the bundled "
    "hand-written sentences it never saw. The converted layer keeps its structure while it trains: a shared "
    "projection is one matrix, so every head that reads it moves with it."
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
        show = ui.progress_bar(bar, "Uptraining: step")
        return ladder.uptrain_rung(
            model,
            layer,
            rung,
            ui.layer_inputs(inp.model, layer),
            ui.cached_pool_runs(inp.model),
            steps,
            seed,
            lambda p: show(p.step, p.steps),
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
        else "Press **Uptrain**: a progress bar follows the steps, with the time left."
    )
    st.stop()
after = ladder.rung_measures(model, run, layer, rung, outcome.fit.module)
before = ladder.rung_measures(model, run, layer, rung)  # with its sentence cosine, whatever the ladder showed
base = ui.cached_baselines(inp, layer)
st.table(sharing_tables.uptrained(outcome, before, after, base.sentence_cosine, emb), hide_index=True)
ui.chart(plots.ladder.loss_curve(outcome.fit.losses, f"{rung.name}, layer {layer}: relative error per step"))
tied = [r.upper() for r in outcome.fit.module.shared_roles]
st.caption(
    f"{rung.name} ({' / '.join(str(g) for g in rung.heads)} projections of Q, K, V, {rung.pooling}), layer {layer}, "
    f"{steps:,} steps in {outcome.fit.seconds:.0f} s. On the {outcome.held_out_sentences} held-out sentences the "
    "relative error of the "
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
        f"{seed}; held out, {outcome.held_out_sentences} sentences; the layer's attention removed: "
        f"{emb} {outcome.removed_cosine:.3f}):"
    )
    st.table(sharing_tables.uptrained_so_far(done, emb), hide_index=True)
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
