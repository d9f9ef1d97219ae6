"""Do we need every head? What each head is worth on sentence similarity (the bundled pairs), how many can go."""

import streamlit as st

import ui
from mha import plots
from mha.lesson import answers
from mha.models import catalog
from mha.tasks import next_token, pruning, similarity, yardstick

sg = answers.signed  # a change with its sign, never -0.000

st.title("Do we need every head?")
inp, run, model = ui.page_start()
L, H = model.n_layers, model.n_heads


def loss_study() -> None:
    """The study on a decoder's own task, next-token loss (mha/tasks/pruning.py)."""
    rank, score = next_token.texts("rank"), next_token.texts()
    st.markdown(
        "Multi-head attention needs distinct heads to *learn* different relations (the training page shows it). "
        "Once a model is trained, are all of them still needed? Michel et al. 2019 (*Are Sixteen Heads Really Better "
        "than One?*) removed heads at test time and found many could go. Here the yardstick is "
        f"{model.traits.who}'s own task, predicting the next token: {yardstick.NEXT_TOKEN.what}. The heads are "
        "ranked by Michel et al.'s "
        f"gradient importance on {len(rank)} other sentences (the benchmark's train split), and every count is scored "
        f"on the {len(score)} it never saw. A removed head's output is zero before $W^O$."
    )
    ui.scored_texts_download()
    study = ui.STUDIES.get(inp.model)
    if study is None:
        st.info(
            f"Measuring {L * H} heads runs one backward pass per ranking sentence and the whole model "
            f"{len(pruning.LOSS_STUDY['seeds']) + 1} x {len(range(0, L * H, pruning.LOSS_STUDY['step']))} times."
        )
        if not st.button("Measure every head (once for this model, for everyone)", key="needed_measure"):
            st.stop()
        bar = st.progress(0.0, text="Ranking the heads...")
        study = ui.loss_study(
            inp.model, lambda done, total: bar.progress(done / total, text=f"{done} of {total}"), ui.queue_place(bar)
        )
        bar.empty()
    st.header("What each head is worth")
    hover = [[f"layer {la}, head {h}: {study.gradient[la, h]:.4f}" for h in range(H)] for la in range(L)]
    ui.chart(plots.atlas.atlas_heatmap(study.gradient, hover, "Gradient importance (Michel et al. 2019)"))
    top = study.top
    st.caption(
        f"The mean over the {study.n_rank} ranking sentences of |d loss / d gate| with a gate of 1 on each head's "
        f"output: how fast the loss moves when the head is turned down. The largest is layer {top[0]}, head {top[1]}."
    )
    st.header("How many can go?")
    ui.chart(plots.pruning.loss_chart(study))
    n, rand = study.can_go(), study.random_can_go()
    k = study.removed.index(n)
    st.success(
        f"Ranked on {study.n_rank} sentences and scored on the {study.n_score} it never saw, **{n} of {L * H} heads** "
        f"can go before the loss rises by more than {study.tolerance} nats per token (perplexity up "
        f"{study.tolerance_ratio:.0%}; counted every {pruning.LOSS_STUDY['step']} heads, from {study.loss[0]:.3f}; "
        f"at {n} "
        f"removed the change is {sg(study.loss[k] - study.loss[0])}, {study.level:.0%} interval "
        f"{sg(study.low[k])} to {sg(study.high[k])}). Counting only points whose whole interval stays below "
        f"+{study.tolerance}: {ui.seed_words(study.strict)}. "
        f"Random orders ({len(rand)} seeds): {min(rand)} to {max(rand)}. With no head left at all the loss is "
        f"{study.loss[-1]:.2f} ({sg(study.loss[-1] - study.loss[0], 2)}).",
        icon=":material/content_cut:",
    )
    editor(
        study.gradient,
        f"the {len(score)} held-out sentences",
        "Next-token loss (nats)",
        -1,
        f"Adds the heads with the smallest gradient importance, ranked on the {study.n_rank} ranking sentences.",
        "Lower is better. The ranking comes from other sentences, so on these it is held out.",
    )


def editor(importance, scored_on: str, name: str, sign: int, least_help: str, note: str) -> None:
    """Remove heads yourself: any heads, and the least important by `importance` (L, H); the task's
    score `name` on `scored_on` (sign +1: higher is better) and the maps left."""
    st.header("Remove heads yourself")
    e1, e2 = st.columns([3, 1])
    picked = ui.setting_widget(
        "multiselect",
        "Heads to remove",
        "needed_remove",
        e1,
        options=[(la, h) for la in range(L) for h in range(H)],
        format_func="layer {0[0]}, head {0[1]}".format,
    )
    least = int(
        ui.setting_widget(
            "number_input", "and the least important", "needed_least", e2, min_value=0, max_value=L * H, help=least_help
        )
    )
    removed = tuple(sorted(set(picked) | set(similarity.order_by(importance)[:least])))
    score, whole = ui.cached_task(inp.model, removed), ui.cached_task(inp.model)
    m1, m2 = st.columns(2)
    m1.metric(
        f"{name} on {scored_on}, {len(removed)} of {L * H} heads removed",
        f"{score.value:.3f}",
        delta=f"{sg(score.value - whole.value)} vs the whole model's {whole.value:.3f}",
        delta_color="normal" if sign > 0 else "inverse",
    )
    m2.metric("Heads left", f"{L * H - len(removed)}")
    st.caption(note)
    ui.chart(plots.heads.model_view(pruning.attentions_without(model, run, removed)))
    st.caption(
        "Your sentence's attention in the heads that are left (a removed head's tile is dark: all its weights are 0). "
        "Removing a head also changes what later layers see, so the remaining maps move too."
    )


if model.traits.task == "next-token":  # the study and its words are the loss's
    loss_study()
    ui.words("head importance", "next-token loss", "causal mask", "bootstrap interval")
    st.stop()
st.markdown(
    "Multi-head attention needs distinct heads to *learn* different relations (the training page shows "
    "it). Once a model is trained, are all of them still needed? Michel et al. 2019 (*Are Sixteen Heads "
    "Really Better than One?*) removed heads at test time and found many could go; Voita et al. 2019 "
    "pruned 38 of 48 encoder heads for 0.15 BLEU. Here the yardstick is sentence similarity, "
    + (
        f"the task {inp.model} was trained for"
        if inp.model == catalog.DEFAULT_MODEL
        else f"the task the bundled {catalog.DEFAULT_MODEL} was trained for, not {inp.model}"
    )
    + ": does the model still rank sentence pairs by meaning? The score is "
    "Spearman's rank correlation between the model's cosine and a similarity graded by people, on pairs of the "
    f"STS Benchmark (Cer et al. 2017): the heads are ranked on its {len(similarity.sts_pairs('train')):,} train pairs "
    f"(image captions) and every count is scored on pairs the ranking never saw, its "
    f"{len(similarity.sts_pairs('dev'))} dev pairs (captions and SNLI sentences) and, as a second set, the "
    f"{len(similarity.similarity_pairs())} pairs written for this project. A removed head's output is zero "
    "before $W^O$."
)
store = ui.STUDIES
study = store.get(inp.model)
if study is None and inp.model != catalog.DEFAULT_MODEL:  # larger models: only when asked
    st.info(
        f"Measuring all {L * H} heads of {inp.model} removes each in turn and runs the whole model on "
        f"{len(similarity.sts_pairs('train')):,} sentence pairs each time: many minutes for a large model."
    )
    if not st.button("Measure every head (once for this model, for everyone)", key="needed_measure"):
        st.stop()
if study is None:
    note = st.empty()
    if store.busy(inp.model):
        note.info("Another session is measuring every head: waiting for its result...", icon=":material/hourglass:")
    bar = st.progress(0.0, text=f"Removing each of the {L * H} heads in turn (once per model)...")
    study = ui.heads_study(
        inp.model,
        lambda done, total: bar.progress(done / total, text=f"{done} of {total} model runs"),
        ui.queue_place(note),
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

st.header("What each head is worth")
hover = [
    [f"layer {l}, head {h}: drop {sg(imp.drop[l, h], 4)}, gradient {imp.gradient[l, h]:.4f}" for h in range(H)]
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
    f"Measured on the {study.n_rank:,} ranking pairs, where the full model's Spearman is {imp.base:.3f}. Left: the "
    f"drop when one head is removed (red = the score falls; blue = it rises); the largest is layer {top[0]}, head "
    f"{top[1]} ({sg(imp.drop[top])}). Right: Michel et al.'s importance, the mean over pairs of |d loss / d gate| "
    "with the loss a pair's squared distance from the model's own line of cosine against grade. The two rank the "
    f"heads {ui.agreement_words(agreement)}: Spearman {agreement:.2f} between the gradient and |drop|."
)

st.header("How many can go?")
st.markdown(
    "Remove heads one after another, **least important first**: by the drop measured above, signed, so heads "
    "whose removal *raised* the score go first. A ranking flatters itself on the pairs that chose it (the dashed "
    "in-sample curve), so what counts is **held out**: the same order scored on the benchmark's dev pairs (the "
    f"shaded band is its {study.level:.0%} bootstrap interval over those pairs) and on the written pairs. The grey "
    "band is random orders; the dotted line, every head removed."
)
ui.chart(plots.pruning.pruning_chart(study))
tol, main, written = study.tolerance, study.main, study.held_out[1]
n, rand = main.can_go(tol), study.random_can_go()
sure, written_sure = min(main.strict), min(written.strict)  # strict counts at their lowest over bootstrap seeds
change, low, high = main.change_at(n)
w_change, w_low, w_high = written.change_at(written.can_go(tol))
full, floor = main.curve.spearman[0], main.curve.spearman[-1]
median_rand = sorted(rand)[len(rand) // 2]
st.success(
    f"Ranked on the {study.n_rank:,} train pairs and scored on the {main.n_pairs} dev pairs it never saw, "
    f"**{n} of {L * H} heads** can go before Spearman drops by {tol} (counted every {main.curve.removed[1]} heads, "
    f"from {full:.3f}; at {n} removed the change "
    f"is {sg(change)}, {study.level:.0%} interval {sg(low)} to {sg(high)}). "
    + (
        f"Counting only points whose whole interval stays above -{tol}: {ui.seed_words(main.strict)}. "
        if set(main.strict) != {n}
        else f"The whole interval stays above -{tol} up to there under all {len(main.strict)} bootstrap seeds. "
    )
    + f"Random orders: {min(rand)} to {max(rand)} ({len(rand)} orders, every {study.random[0].removed[1]} heads). "
    f"On the {written.n_pairs} written pairs the same order lets {written.can_go(tol)} go (there the change is "
    f"{sg(w_change)}, {study.level:.0%} interval {sg(w_low)} to {sg(w_high)}); counting the whole "
    f"interval, {ui.seed_words(written.strict, bold=False)}. With no head left at all, Spearman on the "
    f"dev pairs is {floor:.3f}"
    + (": the embeddings and feed-forward layers still carry much of the task." if floor >= 0.75 * full else "."),
    icon=":material/content_cut:",
)
agree = study.halves_agreement
st.info(
    f"**What these pairs can tell you, and what not.** Two random halves of the ranking pairs rank the heads alike "
    f"at Spearman {min(agree):.2f} to {max(agree):.2f} ({len(agree)} halvings; 1 = the same order). "
    + (
        "So the map of single heads above is a rough guide at best: do not read one head's colour as how much it "
        "matters. "
        if max(agree) < 0.8
        else "The map of single heads holds across halves of the pairs. "
    )
    + (
        f"On the benchmark's dev pairs the count clears the noise: even counted strictly (at least {sure} under every "
        "bootstrap seed), the ranked order "
        + (
            f"lets more heads go than each of the {len(rand)} random orders drawn here (they reach at most "
            f"{max(rand)}; more orders could reach further). "
            if sure > max(rand)
            else f"lets more heads go than most of the {len(rand)} random orders drawn here. "
        )
        if sure > median_rand
        else f"On the benchmark's dev pairs the count does not clear the noise: counted strictly it can be {sure}, and "
        f"random orders reach {median_rand} or more half the time. "
    )
    + "On the written pairs, a different kind of text not scored for random orders, the strict count is "
    f"{ui.seed_words(written.strict, bold=False)}. How many heads can go depends on the text they are "
    "judged on.",
    icon=":material/rule:",
)

editor(
    imp.drop,
    "the written pairs",
    "Spearman",
    +1,
    "Adds the heads with the smallest (signed) drop, ranked on the benchmark's train pairs.",
    f"Scored on the {len(similarity.similarity_pairs())} pairs written for this project (a quick score; the ranking of "
    "*least important* comes from the benchmark's train pairs, so on these pairs it is held out).",
)
if sure > median_rand:
    st.markdown(
        "The lesson's point holds both ways: heads with distinct projections are how a layer *learns* several "
        f"relations at once, and this trained model could spare at least {sure} of its {L * H} heads on the "
        f"benchmark's dev pairs afterwards (at least {written_sure} on the written pairs). Sharing one projection "
        "removes the distinct lenses before training; pruning after training removes heads a task can do without."
    )
ui.words("Spearman's rank correlation", "bootstrap interval", "head importance", "ablation drop", "[CLS] and [SEP]")
