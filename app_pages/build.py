"""Build it from scratch: the from-scratch MultiHeadAttention on the typed sentence, stage by stage."""

import streamlit as st

import ui
from mha import MultiHeadAttention, plots
from mha.analyses import collapse, ladder
from mha.analyses.build import PERMUTED, build_stages, output_stripe, outside_window
from mha.analyses.groups import group_ranges
from mha.core.attention import valid_head_counts
from mha.lesson import answers, structure_words

MAX_SHOWN = 64  # token rows drawn per matrix; the computation always uses all tokens
WINDOWS = (4, 8, 16, 32)  # the sliding windows a learner may try

st.title("Build multi-head attention from scratch")
inp, run, model = ui.page_start()
C, H_model = model.d_model, model.n_heads
traits = model.traits
who, G, grouped = traits.who, traits.kv_groups, traits.grouped
parts = [*(["causal mask"] if traits.causal else []), *(["rotary positions"] if traits.positions == "rotary" else [])]
parts += ["K/V groups"] if grouped else []

c1, c2, c3, c4 = st.columns([1.4, 1, 1, 1])
SOURCES = {"BERT layer": "bert", "Random (seeded)": "random"}  # shown -> build_stages' weights
about = f"Real weights from a {who} layer, or a fresh random initialisation."
source = ui.setting_widget(
    "radio",
    "Weights",
    "build_source",
    c1,
    options=SOURCES,
    horizontal=True,
    help=about,
    format_func={o: o.replace("BERT", who) for o in SOURCES}.__getitem__,
)
layer, _ = ui.layer_head(run, container=c2, head=False)
choices = [H_model] if grouped else [h for h in valid_head_counts(C) if h <= 48]  # K/V groups fix the count
H = ui.setting_widget(
    "selectbox",
    "Number of heads H",
    "build_heads",
    c3,
    default=H_model,
    follows=inp.model,
    options=choices,
    help=f"{who}'s {H_model} query heads share {G} K/V projections: the groups fix the head count here."
    if grouped
    else f"Only divisors of $d_{{model}}$ = {C} split it evenly into heads of $d_k = d_{{model}} / H$.",
)
head = ui.setting_widget(
    "selectbox", "Head to follow", "build_follow", c4, options=range(H), format_func="head {}".format
)
t1, t2, t3, t4 = st.columns(4)
shared = ui.setting_widget("toggle", "Shared Q/K/V", "build_shared", t1)
scale = ui.setting_widget("toggle", r"Divide by $\sqrt{d_k}$", "build_scale", t2)
shuffle = ui.setting_widget("toggle", "Shuffle the words", "build_shuffle", t3)
seed = int(
    ui.setting_widget(
        "number_input", "Seed", "build_seed", t4, min_value=0, max_value=10_000, disabled=SOURCES[source] == "bert"
    )
)
st.caption(
    "Shared Q/K/V: every head uses one $W^Q, W^K, W^V$, the mean of the heads' slices rescaled to a slice's length "
    "(as on the collapse page). Shuffle: the input tokens in another order (no position information)."
)
own_window = traits.window(layer)
window = 0
if traits.causal:  # a sliding window narrows a causal mask; an encoder's token reads every key
    windows = {0: f"the layer's own ({own_window:,} keys)" if own_window else "none (the layer's own)"}
    windows |= {w: f"{w} keys" for w in WINDOWS if w != own_window}
    window = ui.setting_widget(
        "selectbox",
        "Sliding window",
        "build_window",
        options=windows,
        format_func=windows.__getitem__,
        help="A query reads only itself and the W - 1 tokens before it (Beltagy et al. 2020, *Longformer*; "
        "Jiang et al. 2023, *Mistral 7B*). Another window than the layer's own is a change: no parity check.",
    )
D = traits.d_head if H == H_model else C // H  # the model's own head size, or C / H for another split

s = build_stages(model, run, layer, H, SOURCES[source], seed, shared, scale, shuffle, window or None)
tr, tokens = s.trace, s.tokens
T = len(tokens)
shown = tokens[:MAX_SHOWN]
if T > MAX_SHOWN:
    st.caption(
        f"Matrices show the first {MAX_SHOWN} of {T} tokens (the grid of all heads averages all {T} into tiles); "
        f"what a caption says of a matrix's cells and columns is of those {MAX_SHOWN} rows, every other number is "
        f"computed on all {T}."
    )

if s.parity is not None:
    st.success(
        f"Parity check: max |from-scratch - {who}| attention weight in layer {layer} = {answers.small(s.parity)}"
        + (f" ({', '.join(parts)} included)" if parts else ""),
        icon=":material/check_circle:",
    )
else:
    st.info(
        f"Parity with {who} is checked with {who}'s own weights, H = {H_model}, its own projections"
        + (" and window" if traits.causal else "")
        + " and scaling on"
        + (
            ", in the sentence's own order (shuffled, a layer with a causal mask or rotary positions does more "
            "than reorder its weights)."
            if traits.order_inside
            else "."
        ),
        icon=":material/info:",
    )


if s.window_changed:
    hidden = outside_window(run.attentions[layer], s.window)  # the model's own weights beyond the new window
    per_token = ladder.kv_cache_bytes(1, G if grouped else H, D)  # one layer's K and V for one token, fp16
    cached = min(T, own_window) if own_window else T  # the tokens the layer's own cache holds
    st.warning(
        f"**Changed**: layer {layer} runs with a sliding window of {s.window} keys in place of "
        + (f"its own {own_window:,}" if own_window else "none (every earlier token)")
        + f", so no parity check. Each token reads only itself and the {s.window - 1} tokens before it. "
        + (
            f"On your {T} tokens, {who}'s own weights put {answers.share(hidden)} of their weight on keys this "
            f"window hides (averaged over its {H_model} heads and the {T - s.window} queries past the window); the "
            f"window spreads it over the keys left. What it saves: this layer's K/V cache holds at most {s.window} "
            f"tokens, {ladder.size(per_token * s.window)} in fp16 instead of {ladder.size(per_token * cached)} for "
            f"{cached} tokens."
            if T > s.window
            else f"Your sentence has {T} tokens, no more than the window: nothing is hidden yet. Type a longer one."
        ),
        icon=":material/crop:",
    )

lo, hi = head * D, (head + 1) * D

st.header(f"0. Input X ({T} x {C})")
st.markdown(
    f"{who}'s hidden states entering layer {layer}, "
    + (f"{traits.norm}-normalised as its attention reads them" if traits.pre_norm else "as its attention reads them")
    + f": one {C}-dimensional vector per token."
)
ui.chart(plots.build.matrix_heatmap(tr.x[0, :MAX_SHOWN], shown, "X"))
m1, m2, m3 = st.columns(3)  # under the first picture: it stays on a projector's first screen
m1.metric(r"$d_{model}$ / heads $h$ / $d_k$", f"{C} / {H} / {D}")
bias = model.scratch_layer(layer).q_proj.bias is not None
own = dict(d_head=D, qk_norm=traits.qk_norm is not None) if H == H_model else {}  # Gemma's head size and norms
n_dist = MultiHeadAttention.parameter_count(C, H, (H, G, G) if grouped else None, bias, **own)
n_shared = MultiHeadAttention.parameter_count(C, H, (1, 1, 1), bias, **own)
m2.metric(f"Parameters, {G} K/V groups" if grouped else "Parameters, distinct", f"{n_dist:,}")
m3.metric("Parameters, shared", f"{n_shared:,}", delta=f"{n_shared - n_dist:,}", delta_color="off")

st.header(f"1. Project: $Q_i, {'K, V' if G == 1 < H else 'K_i, V_i'}$ ({T} x {D} per head)")
st.markdown(
    f"$X W^Q$ is one {T} x {H * D} product; head {head} owns columns {lo}..{hi - 1} of it "
    + (
        "(with **shared** projections every head reads the same $d_{model} \\times d_k$ matrix; the lines mark "
        "where each head's slice starts)."
        if shared
        else f"(its own $W_{{{head}}}^Q$: {C} x {D}). The lines mark the {H} slices."
    )
)
ui.chart(
    plots.build.matrix_heatmap(
        s.q_heads_side_by_side[:MAX_SHOWN],
        shown,
        "Q = X W<sup>Q</sup>"
        + (", normed" if traits.qk_norm is not None else "")
        + (", rotated" if s.unrotated is not None else "")
        + ", split into heads",
        boundaries=[h * D for h in range(1, H)],
    ),
)

if grouped and not shared and G == 1:
    st.markdown(
        f"$K$ and $V$ have one projection each, of width {D} ({D} columns, not {H * D}): all {H} heads read it "
        "(multi-query attention, Shazeer 2019), and only their $W_i^Q$ set them apart."
    )
elif grouped and not shared:
    st.markdown(
        f"$K$ and $V$ have only {G} projections of width {D} ({G * D} columns, not {H * D}): heads "
        f"{group_ranges(H, G)} each read one of them (grouped-query attention, Ainslie et al. 2023). Head {head} "
        f"reads K/V group {head // (H // G)}."
    )
if s.unrotated is not None:
    st.header("1b. Positions: rotate $q$ and $k$ (RoPE)")
    moved = float(abs(tr.weights[0, head] - s.unrotated[head]).sum(-1).max() / 2)
    st.markdown(
        f"{who} adds no position vector to the tokens. Instead each query and key is rotated, pair of coordinates "
        f"by pair, by an angle proportional to its position (Su et al. 2021, *RoFormer*), so $q \\cdot k$ depends on "
        f"how far apart two tokens are. Without the rotation head {head}'s weights would be the map on the right; "
        f"the rotation moves up to {moved:.0%} of a query's weight (the largest total variation over the queries)."
    )
    r1, r2 = st.columns(2)
    ui.chart(
        plots.heads.attention_heatmap(tr.weights[0, head, :MAX_SHOWN, :MAX_SHOWN], shown, f"Head {head}: with RoPE"),
        container=r1,
    )
    ui.chart(
        plots.heads.attention_heatmap(
            s.unrotated[head, :MAX_SHOWN, :MAX_SHOWN], shown, f"Head {head}: without the rotation"
        ),
        container=r2,
    )

st.header(f"2. Scores ${structure_words.scores_tex(model.traits)}$ ({T} x {T}) and the softmax")
s1, s2, s3 = st.columns(3)
s1.metric(
    "Spread of raw scores",
    f"{s.score_std[head]:.2f}",
    help="The standard deviation of a query's scores over the keys, averaged over the queries (a shift that moves "
    "all of one query's scores is not counted; the softmax ignores it). The other pages' score spread is this "
    "measure after the division by $\\sqrt{d_k}$, the next number.",
)
s2.metric(r"Spread after / $\sqrt{d_k}$" if scale else "Spread (not scaled)", f"{s.scaled_std[head]:.2f}")
s3.metric(
    "mean largest weight per row",
    f"{s.max_weight[head]:.2f}",
    help="Near 1 means the softmax saturates: each token reads one key only."
    + (" The first token, which can read only itself, is left out." if traits.causal else ""),
)
st.markdown(
    f"The dot product of two {D}-dimensional vectors with independent, zero-mean, unit-variance entries has "
    f"standard deviation $\\sqrt{{d_k}}$ = {D**0.5:.1f}; dividing by it keeps the scores' spread from growing with "
    "$d_k$, so the softmax does not saturate just because "
    "$d_k$ is large (Vaswani et al. 2017, section 3.2.1). A head whose scaled scores still spread widely saturates "
    "anyway: that is what it learned. "
    + ("" if scale else "**Scaling is off**: watch the largest weight per row approach 1.")
    + (
        " The causal mask sets every score of a later key to $-\\infty$ before the softmax: each row spreads its "
        "weight over itself and the tokens before it, and the map is a lower triangle."
        if traits.causal and (s.window is None or T <= s.window)
        else f" The causal mask and the sliding window set every score of a later key, and of a key {s.window} or "
        "more tokens back, to $-\\infty$ before the softmax: each row spreads its weight over itself and at most the "
        f"{s.window - 1} tokens before it (a row before position {s.window - 1} has fewer)"
        + (
            ", and the dashed line marks where the band stops."
            if len(shown) > s.window
            else f" (the map shows the first {len(shown)} tokens, which the window does not reach)."
        )
        if traits.causal
        else ""
    )
)
ui.chart(
    plots.heads.attention_heatmap(
        tr.weights[0, head, :MAX_SHOWN, :MAX_SHOWN],
        shown,
        f"Head {head}: softmax(QK<sup>T</sup>{' / √d<sub>k</sub>' if scale else ''})",
        window=s.window,
    ),
)

st.header(f"3. All {H} heads at once")
ui.chart(
    plots.heads.head_grid(
        tr.weights[0], f"Attention weights of all {H} heads", groups=G if grouped and not shared else None
    )
)
if shared:
    st.warning(
        f"Shared projections: every head computes the same map (max difference between heads "
        f"{answers.small(s.head_spread)}). {H} heads, one point of view."
        if s.head_spread < collapse.SAME_WEIGHTS
        else f"Shared projections, yet the heads' maps differ by up to {answers.small(s.head_spread)}.",
        icon=":material/call_merge:",
    )

k1, k2, k3 = st.columns(3)
k1.metric(
    "Head diversity (mean JS between heads)",
    f"{s.measures['head diversity (JS)']:.3f}",
    help="0 = every head attends exactly alike (Clark et al. 2019's distance).",
)
k2.metric(
    "Subspace overlap of $W^Q$ slices",
    f"{s.measures['subspace overlap W^Q']:.2f}",
    help="Mean cos² of principal angles between heads' $d_{model} \\times d_k$ slices; 1 = one shared subspace.",
)
k3.metric(
    "Effective number of heads",
    f"{s.measures['effective number of heads']:.1f}",
    help=f"How many different outputs the heads write: the effective rank of the {H} heads' outputs taken as {H} "
    "vectors (each flattened and scaled to length 1). 1 when every head writes the same output, as with a shared "
    f"Q, K and V; about {H} for unrelated heads. Heads with one map but their own $W^V$ still count apart.",
)
st.page_link(
    "app_pages/collapse.py",
    label="Sharing on real weights, step by step: the collapse page",
    icon=":material/call_merge:",
)

st.header(f"4. Head outputs ({T} x {D}) -> concatenation ({T} x {H * D})")
ui.chart(
    plots.build.matrix_heatmap(
        tr.concat[0, :MAX_SHOWN], shown, "Concat(head_1, ..., head_H)", boundaries=[h * D for h in range(1, H)]
    ),
)

st.header(f"5. Mix with $W^O$ ({H * D} x {C}) -> output ({T} x {C})")
ui.chart(
    plots.build.matrix_heatmap(
        tr.output[0, :MAX_SHOWN], shown, "Output = Concat W<sup>O</sup>" + (" + b" if bias else "")
    )
)
stripe = output_stripe(tr.output[0, :MAX_SHOWN])
st.caption(
    f"No head blocks here: $W^O$ mixes all {H} heads into every output dimension, so the lines of step 4 are gone. "
    + (
        f"The column that stands out, dimension {stripe.dim}, is one dimension the layer writes alike for every "
        f"token (mean {stripe.mean:+.2f} over the {'tokens' if T <= MAX_SHOWN else f'{MAX_SHOWN} tokens drawn'}, "
        f"against {stripe.runner_up:.2f} for the second largest "
        "column and "
        f"{stripe.typical:.2f} for the median one), not a boundary. "
        if stripe.stands_out
        else ""
    )
    + f"The largest cell, {stripe.peak:+.2f} at “{plots.common.token_label(shown[stripe.peak_token])}”, dimension "
    f"{stripe.peak_dim}, sets the colour range."
)

if s.order_errors is not None:
    e = s.order_errors
    plain = list(e)[-1]  # the layer with every order-aware part removed
    without = plain.replace("the mask and the rotary positions", "the mask and the rotation")
    st.info(
        f"Shuffled input: {who}'s layer does **not** only reorder its outputs (max difference "
        f"{answers.small(e['as the model has it'])})."
        + (
            f" Without its causal mask it still differs by {answers.small(e['without the causal mask'])}: the rotary "
            "positions sit inside $q \\cdot k$."
            if len(e) == 3
            else ""
        )
        + f" {without.capitalize()} the same weights only reorder (max difference {answers.small(e[plain])}): "
        "attention itself has no sense of order; positions enter where the model puts them"
        + (": a learned vector added to each token before layer 0" if traits.positions == "learned" else "")
        + " (next lesson: positional encodings).",
        icon=":material/shuffle:",
    )
elif s.shuffle_error is not None:
    st.info(
        f"Shuffled input: every token's output is the same as before, only reordered "
        f"(max difference {answers.small(s.shuffle_error)}). Attention alone ignores word order; {who} adds learned "
        "position embeddings before layer 0 to know it (next lesson: positional encodings)."
        if s.shuffle_error < PERMUTED
        else f"Shuffled input: the outputs differ from the reordered ones by up to {answers.small(s.shuffle_error)}.",
        icon=":material/shuffle:",
    )
ui.words(
    "head width",
    "subspace overlap",
    "principal angles",
    "rescaled mean",
    "effective number of heads",
    *(("causal mask",) if traits.causal else ()),
    *(("rotary position embeddings",) if traits.positions == "rotary" else ()),
    *(("multi-query",) if traits.grouped else ()),
)
