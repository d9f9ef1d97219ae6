"""Why many heads: train one head, shared heads and distinct heads live on a task that needs several relations."""

import streamlit as st

import ui
from mha import plots
from mha.analyses import collapse, metrics
from mha.analyses import experiment as ex
from mha.lesson import answers

st.title("Why many heads: train them and see")
st.markdown(
    "Each position must report the tokens at up to four fixed relations at once (1, 2 and 3 positions back, "
    "and the first token of the sequence; the slider below chooses how many). One head gives each position a "
    "single weighted average, so it cannot fetch several different tokens at full weight at once. Five models "
    "of the same width are trained side by side on the same batches: **distinct** heads; heads that keep "
    "their own $W_i^Q$ but share K and V in groups (**grouped**, Ainslie et al. 2023) or all together "
    "(**mqa**, multi-query, Shazeer 2019); **shared** heads (one $W^Q, W^K, W^V$ for all); and a "
    "**single** full-width head. Vaswani et al. 2017 (Table 3, rows A) saw the same in translation: "
    "one head was 0.9 BLEU below the best number of heads."
)
c1, c2, c3, c4 = st.columns(4)  # kept in the session: a visit to another page does not reset them
n_rel = ui.setting_widget(
    "slider",
    "Relations to report",
    "why_relations",
    c1,
    min_value=1,
    max_value=4,
    help="1 = only the previous token: the control.",
)
heads = ui.setting_widget(
    "selectbox",
    "Heads (distinct / shared)",
    "why_heads",
    c2,
    options=[2, 4, 8],
    help="$d_{model}$ is 32: $d_k$ = 32 / H.",
)
steps = ui.setting_widget(
    "select_slider", "Training steps", "why_steps", c3, options=[100, 200, 300, 500, 1000, 1500, 2000]
)
seed = int(ui.setting_widget("number_input", "Seed", "why_seed", c4, min_value=0, max_value=9999))
settings = ex.Settings(n_relations=n_rel, n_heads=heads, steps=steps, seed=seed)
groups = min(ex.GROUPS, heads)
names = ", ".join(settings.relations)
st.caption(
    f"With these settings: {n_rel} relation{'s' if n_rel > 1 else ''} ({names}); "
    + (
        f"grouped shares K and V in {groups} groups of {heads // groups} heads."
        if groups < heads
        else f"grouped has {groups} groups of one head each: the same structure as distinct heads."
    )
    + (
        f" With {heads} heads for {n_rel} relations, even distinct heads have to share the work."
        if heads < n_rel
        else ""
    )
)

store = ui.EXPERIMENTS
result, train = ui.stored_result_button(
    store,
    settings,
    "Train the five models",
    "why_train",
    "Results are kept per settings: a second visit shows them at once.",
)
interrupted = st.session_state.pop("_why_training", None)  # (settings, step) of a run that did not finish
if interrupted and not train and store.get(interrupted[0]) is None:
    was, step = interrupted
    st.warning(
        f"The training run with {was.n_relations} relations, {was.n_heads} heads, {was.steps:,} steps and seed "
        f"{was.seed} was interrupted at step {step:,} (the page was left or a setting changed while it "
        "trained), so it has no result. Press **Train** to run it again.",
        icon=":material/pause_circle:",
    )
chart, bar = st.empty(), st.empty()
chance = ex.chance_all_targets(settings)


clock = [ui.stopwatch()]  # seconds since the training started: the time left is at the rate so far


def show(p: ex.Progress) -> None:
    st.session_state["_why_training"] = (settings, p.step)  # cleared when the result is kept
    left = ui.time_left(clock[0](), p.fraction)  # models that stop early make it less
    left = f", {left}" if left else ""
    bar.progress(p.fraction, text=f"step {p.step} of {p.steps}{left}; still training: {', '.join(p.training)}")
    ui.chart(
        plots.training.training_curves(p.curves, chance, f"Training, live: step {p.step}"), container=chart.container()
    )


if result is None and train:

    def train_all() -> ex.ExperimentResult:
        clock[0] = ui.stopwatch()  # the time left counts from when the training starts
        bar.progress(0.0, text="Starting (the first run of the server imports part of PyTorch: ~1 s)...")
        return ex.run(settings, show, every=0.5)

    if store.busy(settings):
        bar.info("Another session is training with these settings: waiting for its result...")
    result = ui.shared_run(store, settings, train_all, ui.queue_place(bar))
    st.session_state.pop("_why_training", None)
    bar.empty()
if result is None:
    kept = [r for _, r in store.entries()]
    took = [r for r in kept if r.settings.steps == steps]
    st.info(
        "Press **Train**: "
        + (
            f"the last run here with {steps:,} steps took {sum(m.seconds for m in took[-1].models.values()):.0f} s "
            "of training (a model stops early once it has solved the task)."
            if took
            else "live curves follow the training as it runs."
        )
    )
    st.stop()

models = result.models
ui.chart(
    plots.training.training_curves({k: (m.losses, m.accuracies) for k, m in models.items()}, chance),
    container=chart.container(),
)
st.header("Result on 2,048 new sequences")
st.dataframe(
    [
        {
            "model": k,
            "heads x d_k": f"{m.n_heads} x {m.d_head}",
            "all targets right": f"{m.final_accuracy:.1%}",
            "single targets right": f"{m.final_target_accuracy:.1%}",
            "parameters": m.parameters,
            "steps": m.steps_run,
            "train time (s)": round(m.seconds, 1),
        }
        for k, m in models.items()
    ],
    hide_index=True,
)
d, s_, one = models["distinct"], models["shared"], models["single"]
g, mq = models["grouped"], models["mqa"]
if n_rel == 1:
    learned = [k for k, m in models.items() if m.final_accuracy >= ex.SOLVED]
    scores = ", ".join(f"{k} {m.final_accuracy:.0%}" for k, m in models.items())
    st.success(
        "The control, one relation: "
        + (
            f"every model learns it ({scores}). One head is enough for one relation."
            if len(learned) == len(models)
            else f"{len(learned)} of {len(models)} models reach {ex.SOLVED:.0%} ({scores}): try more steps."
        )
    )
else:
    st.success(
        f"With {n_rel} relations, distinct heads get {d.final_accuracy:.1%} of positions fully right, while "
        f"the single head gets {one.final_accuracy:.1%} and the shared heads {s_.final_accuracy:.1%}, "
        + (
            f"although the single head has as many parameters ({one.parameters:,}). "
            if one.parameters == d.parameters
            else f"with {one.parameters:,} parameters against {d.parameters:,}. "
        )
        + f"Sharing Q, K and V saved "
        f"{d.parameters - s_.parameters:,} parameters and turned {heads} heads into one point of view. "
        f"Sharing only K and V saved {d.parameters - mq.parameters:,} (mqa: {mq.final_accuracy:.1%}; grouped: "
        f"{d.parameters - g.parameters:,} saved, {g.final_accuracy:.1%}): each head keeps its own query, "
        "so it can still ask for its own relation."
    )

st.header("What each head learned, on one example sequence")
T = settings.length
marks = [(name, ex.target_positions(name, T)) for name in settings.relations]
for kind in ex.MODELS:
    ui.chart(
        plots.training.experiment_maps(
            models[kind].example_attention,
            result.example,
            marks,
            f"{kind}: rows = positions, columns = positions read; markers = where each target is",
        ),
    )
reads = {kind: ex.head_relations(models[kind].example_attention, settings.relations) for kind in ex.MODELS}
st.dataframe(
    [
        {
            "model": kind,
            **{f"head {h}": f"{rel} ({w:.0%})" for h, (rel, w) in enumerate(pairs)},
        }
        for kind, pairs in reads.items()
    ],
    hide_index=True,
)


def locked(kind: str) -> set[str]:
    """The relations some head of `kind` puts at least ex.LOCKED of its weight on."""
    return {rel for rel, w in reads[kind] if w >= ex.LOCKED}


shared_maps = models["shared"].example_attention
copies = metrics.head_spread(shared_maps)  # shared heads: one map, or not
st.caption(
    "Each cell: the relation whose target that head reads most on the example above, and its mean weight there. "
    + " ".join(
        f"**{kind}**: {len(locked(kind))} of {n_rel} relations have a head with at least {ex.LOCKED:.0%} on them."
        for kind in ex.MODELS
    )
    + f" {answers.differ_words(copies, 'The shared heads’ maps')}: "
    + ("copies of each other." if copies < collapse.SAME_WEIGHTS else "not copies (something else differs).")
)
ui.words("head width", "head diversity")
