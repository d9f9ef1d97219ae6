"""Do we need every head? What each head is worth on sentence similarity (the bundled pairs), how many can go."""

import streamlit as st

import ui
from mha import bert, plots, task

st.title("Do we need every head?")
st.markdown(
    "Multi-head attention needs distinct heads to *learn* different relations (the training page shows "
    "it). Once a model is trained, are all of them still needed? Michel et al. 2019 (*Are Sixteen Heads "
    "Really Better than One?*) removed heads at test time and found many could go; Voita et al. 2019 "
    "pruned 38 of 48 encoder heads for 0.15 BLEU. Here the yardstick is sentence similarity, the task "
    f"{bert.DEFAULT_MODEL} was trained for: does the model still rank sentence pairs by meaning? The score is "
    "Spearman's rank correlation between the model's cosine and a graded similarity on the bundled set of "
    f"{len(task.similarity_pairs())} pairs (written for this project). A removed head's output is "
    "zero before $W^O$."
)
inp, run, model = ui.page_start()
L, H = model.n_layers, model.n_heads

store = ui.STUDIES
study = store.get(inp.model)
if study is None and inp.model != bert.DEFAULT_MODEL:  # larger models: only when asked
    st.info(
        f"Measuring all {L * H} heads of {inp.model} removes each in turn and runs the whole model on "
        f"{len(task.similarity_pairs())} sentence pairs each time: minutes for a large model."
    )
    if not st.button("Measure every head (once for this model, for everyone)", key="needed_measure"):
        st.stop()
if study is None:
    note = st.empty()
    if store.busy(inp.model):
        note.info("Another session is measuring every head: waiting for its result...", icon=":material/hourglass:")
    bar = st.progress(0.0, text=f"Removing each of the {L * H} heads in turn (once per model)...")
    study = ui.heads_study(
        inp.model, lambda done, total: bar.progress(done / total, text=f"{done} of {total} model runs")
    )
    bar.empty()
    note.empty()
imp = study.importance
if study.origin == "shipped":
    st.caption(
        "Everything on this page but the editor was computed once by `scripts/heads_study.py` on exactly this "
        "model's weights and these pairs (checked when the page loads it), so no visitor waits for it; "
        "`tests/test_pruning.py` computes part of it again."
    )

st.subheader("What each head is worth")
hover = [
    [f"layer {l}, head {h}: drop {imp.drop[l, h]:+.4f}, gradient {imp.gradient[l, h]:.4f}" for h in range(H)]
    for l in range(L)
]
c1, c2 = st.columns(2)
ui.chart(
    plots.atlas.atlas_heatmap(imp.drop, hover, "Spearman lost when the head alone is removed", diverging=True),
    container=c1,
)
ui.chart(plots.atlas.atlas_heatmap(imp.gradient, hover, "Gradient importance (Michel et al. 2019)"), container=c2)
top = imp.top()
agreement = imp.agreement()
st.caption(
    f"The full model's Spearman is {imp.base:.3f}. Left: the drop when one head is removed (red = the "
    f"score falls; blue = it rises); on these {len(task.similarity_pairs())} pairs the largest is layer "
    f"{top[0]}, head {top[1]} ({imp.drop[top]:+.3f}) (how far such a ranking carries: below). Right: Michel et "
    "al.'s importance, the mean over pairs of |d loss / d gate| with the loss a pair's squared distance from the "
    "model's own line of cosine against grade. The two rank the heads "
    f"{ui.agreement_words(agreement)}: Spearman {agreement:.2f} between the gradient and |drop|."
)

st.subheader("How many can go?")
st.markdown(
    "Remove heads one after another, **least important first**: by the drop measured above, signed, so heads "
    "whose removal *raised* the score go first. A ranking chosen on some pairs flatters itself on those same "
    f"pairs, so the {len(task.similarity_pairs())} pairs are split in {len(study.folds)} parts (every kind of "
    "pair in each): the heads are ranked on one part and the curve is scored on the other (**held out**). "
    "The in-sample curves (ranked and scored on the same part) are drawn beside them for comparison, and the "
    "band is random orders."
)
ui.chart(plots.pruning.pruning_chart(study))
held, inside, rand = study.held_out_can_go(), study.in_sample_can_go(), study.random_can_go()
parts = " and ".join(str(n) for n in held)
none_left = " and ".join(f"{f.held_out.spearman[-1]:.3f}" for f in study.folds)
carry = min(f.held_out.spearman[-1] / f.held_out.spearman[0] for f in study.folds) >= 0.5
st.success(
    f"Ranked on one part of the pairs and scored on the other, **{parts} of {L * H} heads** can go before "
    f"Spearman drops by {study.tolerance} (parts {', '.join(str(n + 1) for n in range(len(held)))}). Ranked and "
    f"scored on the same part (in sample), {' and '.join(str(n) for n in inside)}. In a random order, "
    f"{min(rand)} to {max(rand)} ({len(rand)} curves, every {study.folds[0].random[0].removed[1]} heads). With "
    f"no head left at all, Spearman is {none_left}"
    + (
        ": the embeddings and feed-forward layers still carry much of the task."
        if carry
        else " (the full model's: " + " and ".join(f"{f.held_out.spearman[0]:.3f}" for f in study.folds) + ")."
    ),
    icon=":material/content_cut:",
)
agree = study.ranking_agreement()
loose = agree < 0.5
above = min(held) > sorted(rand)[len(rand) // 2]
st.info(
    f"**What {len(task.similarity_pairs())} pairs can tell you, and what not.** The two parts rank the heads "
    f"alike {ui.agreement_words(agree)}: Spearman {agree:.2f} between the drops measured on each "
    "(1 = the same order). "
    + (
        "So the map of single heads above is mostly noise at this size: do not read it as which heads matter. "
        if loose
        else "The map of single heads holds across the two parts, though both come from the same set. "
    )
    + (
        f"What holds on held-out pairs is the count: about {min(held)} heads went at little cost, more than in "
        "most random orders. "
        if above
        else f"Even the count is not better than chance here: held out {min(held)}, random up to {max(rand)}. "
    )
    + "Every pair was written for this project in one style; on other text the same order can lose more.",
    icon=":material/rule:",
)

st.subheader("Remove heads yourself")
options = [(l, h) for l in range(L) for h in range(H)]
e1, e2 = st.columns([3, 1])
picked = ui.kept(
    "multiselect",
    "Heads to remove",
    "needed_remove",
    e1,
    options=options,
    format_func=lambda lh: f"layer {lh[0]}, head {lh[1]}",
)
least = int(
    ui.kept(
        "number_input",
        "and the least important",
        "needed_least",
        e2,
        min_value=0,
        max_value=L * H,
        help="Adds the heads with the smallest (signed) drop, ranked on every pair.",
    )
)
removed = tuple(sorted(set(picked) | set(task.order_by(imp.drop)[:least])))
score = ui.cached_task(inp.model, removed)
m1, m2 = st.columns(2)
m1.metric(
    f"Spearman with {len(removed)} of {L * H} heads removed",
    f"{score.spearman:.3f}",
    delta=f"{score.spearman - imp.base:+.3f}",
    delta_color="normal",
)
m2.metric("Heads left", f"{L * H - len(removed)}")
if least:
    st.caption(
        f"The {least} least important heads were ranked on these same {len(task.similarity_pairs())} pairs: the "
        "score above is in sample, as optimistic as the dashed curves."
    )
ui.chart(plots.heads.model_view(task.attentions_without(model, run, removed)))
st.caption(
    "Your sentence's attention in the heads that are left (a removed head's tile is dark: all its weights are 0). "
    "Removing a head "
    "also changes what later layers see, so the remaining maps move too."
)
if above:
    st.markdown(
        "The lesson's point holds both ways: heads with distinct projections are how a layer *learns* several "
        f"relations at once, and this trained model could spare about {min(held)} of its {L * H} heads on "
        "held-out pairs afterwards. Sharing one projection removes the distinct lenses before training; pruning "
        "removes heads whose work others already do."
    )
ui.words("Spearman's rank correlation", "head importance", "[CLS] and [SEP]")
