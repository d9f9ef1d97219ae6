"""Overview: the three stages of multi-head attention, drawn with the chosen model's shapes."""

import streamlit as st

from mha import diagram, ui

st.title("Multi-head attention, in three stages")
ui.show_notices()
model = ui.get_model()
run = ui.current_run()
C, H = model.d_model, model.n_heads
D = C // H
T = run.n_tokens if run is not None else 16
st.markdown(
    f"One attention head gives every token **one** weighted average over the sentence, so it must "
    f"blend grammar, meaning and position into a single view. Multi-head attention "
    f"(Vaswani et al. 2017, *Attention Is All You Need*) runs **{H} heads** side by side in "
    f"**{model.name}** (d_model C = {C}, so each head works in D = C / H = {D} dimensions), "
    f"shown here for your {T}-token input."
)
st.graphviz_chart(diagram.stages_dot(T, C, H), width="stretch")
c1, c2, c3 = st.columns(3)
with c1:
    st.subheader("1. Project, per head")
    st.markdown(
        f"Each head i has its own W_i^Q, W_i^K, W_i^V ({C} x {D}). They are different lenses: "
        f"each maps the {C}-dimensional token vectors into its own {D}-dimensional subspace. "
        f"In practice one {C} x {C} matrix is applied and its output split into {H} slices."
    )
    st.page_link("app_pages/build.py", label="See the slices on your sentence", icon=":material/build:")
with c2:
    st.subheader("2. Attend, in parallel")
    st.markdown(
        f"Every head computes softmax(Q_i K_i^T / sqrt({D})) V_i at the same time: a {T} x {T} "
        f"map of where each token reads, and a {T} x {D} output. Different heads learn "
        f"different relations: the previous word, the separator, a verb's object."
    )
    st.page_link("app_pages/bert_heads.py", label="Inspect every head of the real BERT", icon=":material/grid_view:")
with c3:
    st.subheader("3. Concatenate, then mix")
    st.markdown(
        f"The {H} outputs ({T} x {D} each) are joined to {T} x {C} and multiplied by W^O "
        f"({C} x {C}), so the next layer gets one representation informed by every head."
    )
    st.page_link("app_pages/collapse.py", label="What if every head shared one projection?", icon=":material/call_merge:")
st.caption(
    "Attention weights show where a head reads, not why the model decides what it decides "
    "(Jain & Wallace 2019; Wiegreffe & Pinter 2019)."
)
