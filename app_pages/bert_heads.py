"""Attention heads: every layer x head of the real model; one head large; where one token attends."""

import streamlit as st

import ui
from mha import plots
from mha.analyses import map_views, sinks
from mha.analyses.groups import group_ranges
from mha.lesson import structure_words

st.title("Attention heads")
inp, run, model = ui.page_start()
traits = model.traits
causal, first = traits.causal, traits.parking == "first"
groups = traits.kv_groups if traits.grouped else None
st.caption(
    f"{run.model_name}: {run.n_layers} layers x {run.n_heads} heads, {run.n_tokens} tokens. "
    "Row = the token that attends (query), column = the token it reads (key); each row sums to 1."
    + (
        f" A decoder is causal: {structure_words.reads(traits, run.n_tokens)}, so every map is a lower "
        "triangle (the first token can read only itself)"
        + (
            f"; in a sliding-window layer the triangle stops {traits.widest_window:,} keys left of the diagonal."
            if traits.sliding_layers and run.n_tokens > traits.widest_window
            else "."
        )
        if causal
        else ""
    )
    + (
        f" All {run.n_heads} query heads read one K and one V (multi-query attention, Shazeer 2019)."
        if groups == 1
        else f" Its {run.n_heads} query heads share {groups} keys and values (grouped-query attention, Ainslie et al. "
        f"2023): heads {group_ranges(run.n_heads, groups)} "
        "each read one K/V group, named beside each head."
        if groups
        else ""
    )
)

st.header("The whole model at a glance")
ui.chart(plots.heads.model_view(run.attentions, groups=groups))
park = sinks.sink_share(run.attentions, run.sinks, causal, traits.windows)
sink_words = f"{traits.sink_name}, “{run.tokens[0].strip() or run.tokens[0]}”" if first else traits.sink_name
st.caption(
    "Each tile is one head (long inputs are averaged into at most "
    f"{plots.heads.TILE} x {plots.heads.TILE} cells per tile). Look for vertical stripes (everyone reads "
    f"{sink_words}), diagonals (the previous{'' if causal else ' or next'} token) and blocks (Kovaleva et al. 2019). "
    + (
        f"On this text the heads put {park.mean:.0%} of their weight on {sink_words}, averaged over every head and "
        + (
            f"the queries that can read it and another token ({park.queries}; {min(park.counted)} on a sliding "
            "layer, whose window passes it); "
            if park.windowed
            else f"the {park.queries} queries that could read another token; "
        )
        + f"{park.heads_over(0.5)} of "
        f"{run.n_layers * run.n_heads} heads put more than half there"
        + (" (an attention sink: Xiao et al. 2024)." if first else " (Clark et al. 2019).")
        if park.queries
        else ""
    )
)

st.header("One head, large")
layer, head = ui.layer_head(run)
pair = 1 in run.segment_ids
o1, o2, o3 = st.columns(3)
hide = ui.setting_widget(
    "toggle",
    "Hide the first token" if causal else "Hide [CLS]/[SEP]",
    "heads_hide",
    o1,
    help="Drops it and renormalises each row to sum to 1."
    if causal
    else "Drops them and renormalises each row to sum to 1.",
)
merge = ui.setting_widget(
    "toggle",
    "Merge word pieces into words",
    "heads_merge",
    o2,
    help="Attention to a word = sum over its pieces; from a word = mean over its pieces.",
)
block = ui.setting_widget(
    "segmented_control",
    "Sentence pair",
    "heads_block",
    o3,
    options=map_views.BLOCKS,
    disabled=not pair,
    help="A decoder reads one sequence: a second sentence follows the first."
    if causal
    else "Type a second sentence in the sidebar to compare A and B.",
)
att, labels, segments = map_views.view(
    run.attentions[layer], run.tokens, run.word_ids, run.segment_ids, hide, merge, run.sinks
)  # (H, T', T')
if hide:
    st.caption(f"{run.traits.sink_name.capitalize()} hidden: rows renormalised over the remaining tokens.")
one = att[head]
q_labels = k_labels = labels
if pair and block:
    one, q_idx, k_idx = map_views.pair_block(one, segments, block)
    q_labels, k_labels = [labels[i] for i in q_idx], [labels[i] for i in k_idx]
    st.caption(
        f"{block}: queries in sentence {block[0]}, keys in sentence {block[-1]}; rows no "
        "longer sum to 1 (the rest of each row falls outside the block)."
    )
W = traits.window(layer)  # this layer's sliding window, if it has one
edge = W if W is not None and not merge and not (pair and block) else None  # drawn on the token map only
c1, c2 = st.columns([3, 2])
ui.chart(
    plots.heads.attention_heatmap(one, q_labels, f"Layer {layer}, head {head}", key_tokens=k_labels, window=edge),
    container=c1,
)
if W is not None:
    st.caption(
        f"Layer {layer} is a sliding-window layer: each token reads only itself and at most the {W - 1:,} tokens "
        f"before it ({W:,} keys; Beltagy et al. 2020, *Longformer*). "
        + (
            f"Your text has {run.n_tokens:,} tokens: below the first {W:,} rows, the dashed line marks where the layer "
            "stops looking, and every weight left of it is exactly 0."
            if run.n_tokens > W and edge is not None
            else f"Your text has {run.n_tokens:,} tokens, more than the window: the edge is drawn on the token map "
            "(turn off merging and the sentence-pair block to see it)."
            if run.n_tokens > W
            else f"Your text has {run.n_tokens:,} tokens, no more than the window, so here the layer reads every "
            "earlier token, as a full layer does."
        )
        + f" What the window saves: generating, this layer's K/V cache needs at most {W:,} tokens' keys and values, "
        "however long the text grows."
    )
with c2:
    others = ui.setting_widget(
        "multiselect",
        "Overlay heads in the line view",
        "heads_overlay",
        default=[head],
        follows=head,
        options=range(run.n_heads),
        format_func=plots.heads.head_names(run.n_heads, groups).__getitem__,
        max_selections=6,
    )
    ui.chart(plots.heads.line_view(att[others or [head]], labels, others or [head]))

st.header("Token focus")
query = ui.token_picker("Token", labels, default=min(2, len(labels) - 1), key="focus_token")
ui.chart(plots.heads.token_focus(att, labels, query))

st.header("Download")
d1, d2, d3 = st.columns(3)
d1.download_button(
    "All attention (.npz)",
    ui.attention_download(inp, "npz"),
    file_name="attention.npz",
    mime="application/octet-stream",
    on_click="ignore",
)
d2.download_button(
    f"Layer {layer}, head {head} (.csv)",
    ui.attention_download(inp, "csv", layer, head),
    file_name=f"attention_l{layer}_h{head}.csv",
    mime="text/csv",
    on_click="ignore",
)
d3.download_button(
    f"Layer {layer}, all heads (.csv)",
    ui.attention_download(inp, "csv", layer),
    file_name=f"attention_l{layer}.csv",
    mime="text/csv",
    on_click="ignore",
)
st.caption(
    "CSV is long format: layer, head, query, query_token, key, key_token, weight. "
    "Every chart also has a PNG download in its toolbar."
)
ui.words(
    "First token" if first else "[CLS] and [SEP]",
    *(["Causal mask"] if causal else []),
    *(["Multi-query"] if traits.grouped else []),
)
