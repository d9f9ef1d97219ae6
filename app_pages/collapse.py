"""Shared Q/K/V: give every head one projection, on the model's real weights, and watch the heads collapse."""

import streamlit as st

import ui
from mha import plots
from mha.analyses import collapse, groups, metrics
from mha.lesson import answers, check_question
from mha.models import catalog
from mha.tasks import yardstick

sg = answers.signed  # a change with its sign, never -0.000

st.title("Shared Q/K/V: watch the heads collapse")
st.markdown(
    "The check question: to *save parameters*, give every head the **same** $W^Q$, $W^K$ and $W^V$. "
    "Here you do it on the model's real weights, on its real input to the layer, and measure what "
    "is left. alpha pulls every head's slice towards the shared one: "
    r"$W_i(\alpha) = (1 - \alpha)\, W_i + \alpha\, W_{shared}$."
)
inp, run, model = ui.page_start()
C, H, T = model.d_model, model.n_heads, run.n_tokens
who, stick = model.traits.who, yardstick.of(model.traits)
D = model.traits.d_head
layer, _ = ui.layer_head(run, head=False)

path = ui.path_controls(H, "collapse")
if path is None:
    st.stop()
alpha, roles = path.alpha, path.roles
names = ", ".join(f"$W^{r.upper()}$" for r in "qkv" if r in roles)
plain_names = ", ".join(r.upper() for r in "qkv" if r in roles)
G = model.traits.kv_groups  # K/V heads: a W^K or W^V below alpha = 1 is per head only when G = H
head_roles = [r for r in "qkv" if r in roles and (r == "q" or G == H)]
group_roles = [r for r in "kv" if r in roles and G < H]
tex = lambda rs: ", ".join(f"$W^{r.upper()}$" for r in rs)  # noqa: E731
parts = [f"every head still has its own {tex(head_roles)}"] if head_roles else []
parts += [f"each of the model's {G} K/V heads its own {tex(group_roles)}"] if group_roles and G > 1 else []
st.caption(
    f"The shared projection is {path.source_name}. "
    + (f"Below alpha = 1 {' and '.join(parts)} (pulled towards the shared one). " if parts else "")
    + (
        f"{tex(group_roles)} {'is one matrix' if len(group_roles) == 1 else 'are one matrix each'} for all {H} "
        "heads already (the model has one K/V head). "
        if group_roles and G == 1
        else ""
    )
    + f"At alpha = 1 each of {names} is one matrix for all {H} heads."
    + (
        " Sharing only $W^Q$ and $W^K$ makes every head attend the same way, but the values stay distinct, so the "
        "heads still write different things into their slices."
        if roles == ("k", "q") and G == H  # a head of its own W^V (with fewer K/V heads, heads of a group share it)
        else ""
    )
)

with st.spinner("Recomputing the layer at alpha = 0, at your alpha and at alpha = 1..."):
    ends = ui.sweep_ends(inp, layer, path)  # alpha = 0 and 1, the path's first and last points: cached
    now = ui.cached_collapse(inp, layer, path)
summary, before = now.summary(), ends[0]
ans = check_question.answer(ends[0], ends[-1], C, H, path)
first_role = roles[0] if "q" not in roles else "q"
overlap_key = f"subspace overlap W^{first_role.upper()}"

p1, p2, p3, p4 = st.columns(4)
p1.metric(
    f"Head diversity (mean JS) at alpha = {alpha:.2f}",
    f"{summary['head diversity (JS)']:.3f}",
    delta=f"{sg(summary['head diversity (JS)'] - before['head diversity (JS)'])} vs {who}'s "
    f"{before['head diversity (JS)']:.3f}",
    delta_color="off",
)
p2.metric(
    f"Subspace overlap of $W^{first_role.upper()}$",
    f"{summary[overlap_key]:.2f}",
    delta=f"{sg(summary[overlap_key] - before[overlap_key], 2)} vs {who}'s {before[overlap_key]:.2f}",
    delta_color="off",
)
p3.metric(
    "Effective number of heads",
    f"{now.effective_heads:.1f}",
    delta=f"{sg(now.effective_heads - before['effective number of heads'], 1)} vs {who}'s "
    f"{before['effective number of heads']:.1f}",
    delta_color="off",
    help=f"How many different outputs the heads write: the effective rank (Roy & Vetterli 2007) of the {H} heads' "
    f"outputs taken as {H} vectors (each {T} x {D} output flattened and scaled to length 1). {H} copies of one "
    f"output give 1, whether that head is sharp or flat. Distinct attention maps now: {now.distinct_maps} of {H}.",
)
p4.metric(
    f"Parameters of the layer at alpha = {alpha:.2f}",
    f"{now.parameters:,}",
    delta=f"{now.parameters - ans.params_distinct:+,} vs {ans.params_distinct:,}" if alpha == 1.0 else None,
    delta_color="off",
    help="Below alpha = 1 no projection is shared yet: only the shared structure at alpha = 1 "
    f"drops weights ({ans.params_shared:,} parameters with {names} shared).",
)

g1, g2 = st.columns(2)
ui.chart(plots.heads.head_grid(run.attentions[layer], f"Layer {layer}: {who}'s own {H} heads"), container=g1)
ui.chart(plots.heads.head_grid(now.weights, f"Layer {layer} at alpha = {alpha:.2f}"), container=g2)
st.caption(
    f"How sharp the maps are: the scaled scores $q \\cdot k / \\sqrt{{d_k}}$ of a query spread over its keys by "
    f"{before['score spread']:.2f} on average in {who}'s heads (standard deviation, mean over queries and heads) and "
    f"by {summary['score spread']:.2f} here; the mean entropy of a map is {before['entropy / ln T']:.2f} of "
    f"$\\ln T$ for {who}'s heads and {summary['entropy / ln T']:.2f} here (1 = uniform)."
)
if path.source == "mean" and ans.flat and {"q", "k"} & set(roles):
    ratios = collapse.norm_ratios(model.scratch_layer(layer))
    shrink = " and ".join(f"$W^{r.upper()}$ {ratios[r]:.1f}" for r in "qk" if r in roles)
    st.warning(
        f"**The plain mean flattens the maps.** The mean of {H} slices is shorter than one slice (a slice is "
        f"{shrink} times as long, about $\\sqrt{{{H}}}$ = {H**0.5:.1f} for unrelated slices), so every score "
        f"shrinks: at alpha = 1 the spread is {ans.spread_shared:.2f} against {ans.spread_bert:.2f} for {who}'s heads, "
        f"and the one map left is nearly uniform (entropy {ans.entropy_shared:.2f} of $\\ln T$). That comes from "
        "averaging, not from sharing: the **rescaled mean** (the default) shares one projection just as much and "
        "keeps a slice's length."
    )

st.header("Head by head")
(m1, m2), (m3, m4) = st.columns(2), st.columns(2)  # two to a row: twelve head labels need the width
ui.chart(
    plots.collapse.head_matrix(now.diversity, "Head diversity (JS, nats)", zmax=metrics.JS_MAX, label="JS"),
    container=m1,
)
for col, role in zip((m2, m3, m4), "qkv"):
    ui.chart(
        plots.collapse.head_matrix(now.overlap[role], f"Subspace overlap W<sup>{role.upper()}</sup>", label="cos²"),
        container=col,
    )
st.caption(
    "Diversity: Jensen-Shannon divergence between two heads' attention, averaged over tokens "
    "(Clark et al. 2019). Overlap: mean cos² of the principal angles between two heads' "
    "$d_{model} \\times d_k$ projection slices (1 = the same subspace). Effective number of heads: exp of the "
    "entropy of the normalised singular values (Roy & Vetterli 2007) of the heads' outputs, one unit vector per head."
)

if model.traits.kv_groups == 1 < H:  # one K and one V for every head (multi-query): nothing to compare across
    st.caption(
        f"All of {who}'s {H} heads read one $W^K$ and one $W^V$ (multi-query attention), so their $W^K$ and $W^V$ "
        "overlaps are 1 by construction at every alpha: only $W^Q$ can set the heads apart."
    )
elif model.traits.kv_groups < H:  # a K/V group is one projection: its heads' overlap is 1 by construction
    across = {r: groups.pair_means(now.overlap[r], groups.groups_of(H, model.traits.kv_groups))[1] for r in "kv"}
    st.caption(
        f"{who}'s heads of one K/V group read one $W^K$ and one $W^V$, so their overlap is 1 by construction and "
        f"counts in the means above; across groups alone, at alpha = {alpha:.2f}: $W^K$ {across['k']:.2f}, $W^V$ "
        f"{across['v']:.2f}, against {metrics.random_overlap(model.traits.d_head, model.d_model):.2f} for two random "
        "subspaces of the same size."
    )

st.page_link(
    "app_pages/subspaces.py",
    label="See the subspaces themselves fold into one: the Subspaces page",
    icon=":material/scatter_plot:",
)

st.page_link(
    "app_pages/sharing.py",
    label="What production models share instead (only K and V): multi-query and grouped-query attention",
    icon=":material/share:",
)

st.header("Along the path")
between = collapse.sweep_counts(H, collapse.SWEEP_STEPS - 2)  # alpha = 0 and 1 are computed above
sweep = None  # the points between alpha = 0 and 1: at once, or on a long sentence after the button
if ui.long_measures(
    model,
    run,
    between,
    ui.sweep_ready(inp, layer, path),
    "collapse_path",
    "Measure the path between alpha = 0 and 1",
    f"the path's {between[0]} points between alpha = 0 and 1 run layer {layer} {between[0]} times and compare its "
    f"{H} heads two by two at each point ({between[2]:,} pairs of {T} x {T} attention maps)",
):
    with st.spinner("Recomputing the layer along the path from distinct to shared..."):
        sweep = ui.cached_sweep(inp, layer, path)  # does not depend on alpha: cached
    ui.chart(plots.collapse.sweep_chart(sweep, alpha))

st.header(f"What it costs the whole model, at alpha = {alpha:.2f}")
scope = ui.setting_widget("radio", "Share in", "collapse_scope", options=["this layer", "every layer"], horizontal=True)
layers = (layer,) if scope == "this layer" else tuple(range(run.n_layers))
every = tuple(range(run.n_layers))
points = [path] if alpha == 1.0 else [path, path.at(1.0)]
cosine = collapse.final_key(model.traits)  # a next-token model pools nothing
runs = [(layers[0], 0)] * len(points) + [(layers[0], len(layers))]  # the path's points, the scope's heads removed
runs += [] if layers == every else [(0, len(every))]  # ... and every head of the model removed
whole = ui.whole_model_runs(
    model,
    run,
    runs,
    all(ui.cached_whole_model.ready(inp, layers, p) for p in points)
    and ui.cached_removal.ready(inp, layers)
    and ui.cached_removal.ready(inp, every),
    "collapse_whole",
    f"the {cosine}s below",
)
effect = effect_shared = removed = none_left = None  # not run: the cosines wait for the button
if whole:
    with st.spinner("Running the whole model with shared projections..."):
        effect, effect_shared = (ui.cached_whole_model(inp, layers, p) for p in (path, path.at(1.0)))
        removed, none_left = ui.cached_removal(inp, layers), ui.cached_removal(inp, every)
with st.spinner(f"Scoring the model on its task: {stick.name}..."):
    task_now = ui.cached_task_shared(inp.model, layers, path)
    task_shared = task_now if alpha == 1.0 else ui.cached_task_shared(inp.model, layers, path.at(1.0))
    task_base = ui.cached_task(inp.model)
    task_removed = ui.cached_task_without(inp.model, layers)
    task_none = ui.cached_task_without(inp.model, every)


def shown(measured: dict | None, key: str) -> str:
    """A cosine of a whole-model run for a metric: three decimals, or "not run"."""
    return "not run" if measured is None else f"{measured[key]:.3f}"


e1, e2, e3, e4 = st.columns(4)
now_change, now_low, now_high = ui.cached_task_change(inp.model, "bert", "shared", layers, path)
e1.metric(
    f"Task: {stick.name}",
    stick.fmt(task_now.value),
    delta=answers.change_words(now_change, now_low, now_high) + f" vs {who}'s {stick.fmt(task_base.value)}",
    delta_color="off",
    help=f"The change and its 90% bootstrap interval over the {task_now.n} {stick.items} (resampled with "
    "replacement); an interval that includes 0 is within the noise of this set.",
)
if cosine.startswith("sentence"):
    e2.metric(f"Sentence embedding cosine to {who}", shown(effect, "sentence embedding cosine"))
else:
    e2.metric(
        "Perplexity", f"{task_now.perplexity:.1f}", delta=f"{who}'s own: {task_base.perplexity:.1f}", delta_color="off"
    )
e3.metric("Mean token cosine", shown(effect, "mean token cosine"))
e4.metric("Worst token cosine", shown(effect, "min token cosine"))
out_now = ui.cached_output_cosine(inp, layer, path)
out_gone = ui.cached_baselines(inp, layer, False).layer_cosine  # the layer's attention removed
OUT = f"layer {layer} attention output cosine"
st.table(  # a table that wraps: a scrolling grid cut its columns off on a phone
    [
        {
            "what changed": f"{plain_names} pulled to alpha = {alpha:.2f} in {scope}",  # no LaTeX here
            stick.short: stick.fmt(task_now.value),
            cosine: "not run" if effect is None else f"{effect[cosine]:.3f}",
            OUT: f"{out_now:.3f}",
        },
        {
            "what changed": f"every head of {scope} removed",
            stick.short: stick.fmt(task_removed.value),
            cosine: "not run" if removed is None else f"{removed[cosine]:.3f}",
            OUT: "no output (no bias)" if out_gone != out_gone else f"{out_gone:.3f}",  # nan: nothing left
        },
        {
            "what changed": "every head of the model removed",
            stick.short: stick.fmt(task_none.value),
            cosine: "not run" if none_left is None else f"{none_left[cosine]:.3f}",
            OUT: "—",
        },
    ],
    hide_index=True,
)
st.caption(
    f"The cosines say how far the representation of your sentence moved; the task says whether the model still does "
    f"its job: {stick.what}. The baselines are measured the same way with heads removed (each head's output zeroed "
    "before $W^O$): a change is worth something only where it beats doing without the attention. The last column is "
    f"layer {layer}'s attention sub-layer itself, per token before the residual is added: the residual stream carries "
    f"the layer's input on unchanged, so the {cosine} can stay near 1 while the attention's own output has turned "
    "away. A cosine near 1 can still hide a real loss."
)
if stick is yardstick.NEXT_TOKEN:
    ui.scored_texts_download()

st.header("The answer, in numbers: alpha = 1")
overlaps = ", ".join(
    f"$W^{r.upper()}$ {ans.overlap_shared[r]:.2f} ({who}: {ans.overlap_bert[r]:.2f})" for r in "qkv" if r in roles
)
maps = (
    f"compute the same attention: {ans.maps_shared} distinct map instead of {ans.maps_bert}, mean divergence "
    f"{answers.small(ans.diversity_shared)} between heads against {ans.diversity_bert:.3f} for {who}'s own"
    if ans.maps_shared == 1
    else f"still attend differently: {ans.maps_shared} distinct maps of {H}, mean divergence "
    f"{ans.diversity_shared:.3f} between heads against {ans.diversity_bert:.3f} for {who}'s own"
)
outputs = (
    f"Every head now writes the same output: the effective number of heads falls from {ans.heads_bert:.1f} to "
    f"{ans.heads_shared:.1f}. "
    if ans.heads_shared < 1.05
    else f"The effective number of heads is {ans.heads_shared:.1f} ({who}: {ans.heads_bert:.1f}). "
)
sharp = (
    f"The map left has score spread {ans.spread_shared:.2f} ({who}'s heads: {ans.spread_bert:.2f} on average) and "
    f"entropy {ans.entropy_shared:.2f} of $\\ln T$ ({who}'s: {ans.entropy_bert:.2f})"
    + (
        ": it is nearly flat because the plain mean is short, not because it is shared. "
        if ans.flat and path.source == "mean"
        else f": it is much flatter than {who}'s heads. "
        if ans.flat
        else ". "
    )
    if ans.maps_shared == 1
    else ""
)
diff, low, high = ui.cached_task_change(inp.model, "removed", "shared", layers, path.at(1.0))
_, gone_low, gone_high = ui.cached_task_change(inp.model, "bert", "removed", layers, path.at(1.0))
blind = gone_low <= 0 <= gone_high  # the pairs cannot tell removing this attention from the whole model
st.markdown(
    f"With {names} shared ({path.source_name}: one matrix for every head) the {H} heads of layer {layer} "
    + maps
    + f". {outputs}{sharp}The heads' subspaces overlap {overlaps}. "
    + f"The layer has {ans.params_shared:,} parameters instead of {ans.params_distinct:,} ({ans.params_saved:,} "
    "saved), "
    + (
        f"but what remains is one head computed {H} times: a single head of width {D} would need a "
        f"{D} x {C} $W^O$ instead of {H * D} x {C} ({(H - 1) * D * C:,} fewer parameters) and one attention map "
        f"instead of {H}. "
        if ans.one_head and ans.maps_shared == 1
        else "and the heads attend alike but still write different values. "
        if ans.maps_shared == 1
        else "and the heads still differ where their projections do. "
    )
    + (
        f"Shared in {scope}, it moves the {'sentence embedding' if cosine.startswith('sentence') else 'final states'} "
        f"to {'cosine' if cosine.startswith('sentence') else 'a mean token cosine'} {effect_shared[cosine]:.3f} of the "
        f"original (removing the attention of {scope} instead: {removed[cosine]:.3f}, "
        + ("further" if removed[cosine] < effect_shared[cosine] else "no further")
        + "), and the "
        if whole
        else f"Shared in {scope}, it changes the "
    )
    + (
        f"model's {stick.short} on its own task "
        if stick is yardstick.NEXT_TOKEN
        else f"model's {stick.name} ({task_base.n} {stick.items}; the sharing page's verdict uses the STS dev pairs) "
        if inp.model == catalog.DEFAULT_MODEL
        else f"model's {stick.short} on the bundled model's task (sentence similarity) "
    )
    + f"from {stick.fmt(task_base.value)} to {stick.fmt(task_shared.value)}; with every head of {scope} removed "
    f"instead it is {stick.fmt(task_removed.value)}. Against that baseline sharing changes it by {sg(diff)} (90% "
    f"bootstrap interval over the {task_shared.n} {stick.items}: {sg(low)} to {sg(high)}): "
    + {
        1: f"better than removing the attention of {scope}.",
        -1: f"worse than removing the attention of {scope} altogether.",
        0: f"on this set it cannot be told apart from removing the attention of {scope} altogether.",
    }[stick.verdict(low, high)]
    + (
        f" Nor can this set tell removing that attention from {who} itself (change "
        f"{sg(task_removed.value - task_base.value)}, interval {sg(gone_low)} to {sg(gone_high)}): on this "
        f"yardstick the attention of {scope} makes no measurable difference, so the task cannot show what sharing "
        "costs there; the cosines and the head measures above can."
        if blind
        else ""
    )
)
if sweep is not None:
    st.download_button(
        "Measures along alpha (.csv)",
        collapse.sweep_csv(sweep),
        file_name=f"collapse_layer{layer}.csv",
        mime="text/csv",
        on_click="ignore",
    )
ui.words(
    "alpha",
    "rescaled mean",
    "distinct maps",
    "entropy / ln T",
    "head diversity",
    "Jensen-Shannon divergence",
    "subspace overlap",
    "principal angles",
    "bootstrap interval",
    "Spearman's rank correlation",
    "effective number of heads",
    "score spread",
    "mean pooling",
    "next-token loss",
)
