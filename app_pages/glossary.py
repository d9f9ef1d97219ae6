"""Glossary: the words the lesson and the tools use, each defined once, with its source."""

import streamlit as st

import ui
from mha.lesson import glossary

st.title("Glossary")
st.markdown(
    "The words the lesson and the tool pages use, in one notation: $d_{model}$ the width of a token vector, "
    "$h$ (or H) the number of heads, $d_k$ the width of one head ($d_{model} / h$ unless the model sets another), "
    "$T$ the number of tokens."
)
traits = ui.model(ui.inputs()).traits
for term in (t for t in glossary.TERMS if t.applies(traits)):
    st.header(term.name, anchor=term.anchor)
    st.markdown(term.text)
ui.show_notices()
