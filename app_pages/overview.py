"""Overview: the three stages of multi-head attention, drawn with the chosen model's shapes."""

import streamlit as st

import ui
from mha.lesson import diagram, structure_words

st.title("Multi-head attention, in three stages")
ui.show_notices()
inp = ui.inputs()
model = ui.model(inp)
run = ui.current_run(inp)
C, H, G = model.d_model, model.n_heads, model.traits.kv_groups
traits = model.traits
D, HD = traits.d_head, traits.heads_width  # d_k, and the heads side by side (C unless the model sets d_k)
causal = traits.causal
T = run.n_tokens if run is not None else 16
st.markdown(
    f"One attention head gives every token **one** weighted average over the sentence, so it must "
    f"blend grammar, meaning and position into a single view. Multi-head attention "
    f"(Vaswani et al. 2017, *Attention Is All You Need*) runs **{H} heads** side by side in "
    f"**{model.name}** (layers as in {traits.architecture}; $d_{{model}}$ = {C}, "
    + (
        f"so each head works in $d_k = d_{{model}} / h$ = {D} dimensions), "
        if HD == C
        else f"and each head works in $d_k$ = {D} dimensions, set by the model: {H} x {D} = {HD}, not {C}), "
    )
    + f"shown here for your {T}-token input."
    + (
        f" {model.name} is a decoder: it predicts the next token, and {structure_words.reads(traits, T)}."
        if causal
        else ""
    )
    + (
        f" {structure_words.kv_sharing(traits)[:1].upper()}{structure_words.kv_sharing(traits)[1:]}."
        if traits.grouped
        else ""
    )
)
shape = structure_words.diagram_args(traits)
ui.diagram(
    diagram.stages_dot(T, C, H, groups=G, causal=causal, **shape),
    diagram.stages_text(T, C, H, groups=G, causal=causal, **shape),
)
value = "V" if G == 1 < H else "V_{g(i)}" if G < H else "V_i"  # the values a head reads
STAGES = [
    (
        "1. Project, per head",
        (
            f"Each head i has its own $W_i^Q$ ({C} x {D}); "
            + (
                f"one $W^K$ and one $W^V$ ({C} x {D}) serve all {H} heads."
                if G == 1
                else f"$W^K$ and $W^V$ come in {G} projections, one per group of {H // G} heads."
            )
            + f" Each head still maps the {C}-dimensional token vectors into its own {D}-dimensional "
            f"query subspace. In practice one {C} x {HD} matrix makes every query and one {C} x {G * D} matrix every "
            "key, their outputs split into slices."
            if G < H
            else f"Each head i has its own $W_i^Q, W_i^K, W_i^V$ ({C} x {D}). They are different lenses: each maps the "
            f"{C}-dimensional token vectors into its own {D}-dimensional subspace. In practice one {C} x {HD} "
            f"matrix is applied and its output split into {H} slices."
        ),
        "app_pages/build.py",
        "See the slices on your sentence",
        ":material/build:",
    ),
    (
        "2. Attend, in parallel",
        f"Every head computes ${structure_words.map_tex(traits)}\\, {value}$ "
        f"(here $d_k$ = {D}) at the same time: "
        f"a {T} x {T} map of where each token reads, and a {T} x {D} output. Different heads learn different "
        f"relations: the previous word, {traits.sink_name}, a verb's object.",
        "app_pages/bert_heads.py",
        f"Inspect every head of the real {model.traits.who}",
        ":material/grid_view:",
    ),
    (
        "3. Concatenate, then mix",
        f"The {H} outputs ({T} x {D} each) are joined to {T} x {HD} and multiplied by $W^O$ ({HD} x {C}), so the "
        "next layer gets one representation informed by every head.",
        "app_pages/collapse.py",
        "What if every head shared one projection?",
        ":material/call_merge:",
    ),
]
for col, (title, text, target, label, icon) in zip(st.columns(len(STAGES)), STAGES):
    col.header(title)
    col.markdown(text)
    col.page_link(target, label=label, icon=icon)
st.page_link(
    "app_pages/subspaces.py",
    label="Each head's own subspace, drawn for your sentence: the Subspaces page",
    icon=":material/scatter_plot:",
)
st.caption(
    "Attention weights show where a head reads, not why the model decides what it decides "
    "(Jain & Wallace 2019; Wiegreffe & Pinter 2019)."
)
ui.words("head width", "the bundled model", "the decoder", "GPT-2")
