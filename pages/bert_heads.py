"""BERT heads: the real attention of one layer and head for the typed sentence."""

import streamlit as st

from mha import plots, ui

st.title("BERT heads")
run = ui.current_run()
if run is None:
    st.stop()
c1, c2 = st.columns(2)
layer = c1.selectbox("Layer", range(run.n_layers), format_func=lambda i: f"layer {i}")
head = c2.selectbox("Head", range(run.n_heads), format_func=lambda i: f"head {i}")
st.plotly_chart(plots.attention_heatmap(run.attentions[layer, head], run.tokens,
                                        f"Layer {layer}, head {head}"))
