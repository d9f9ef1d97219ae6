"""Head atlas: per-head measures from the literature (full page in a later release)."""

import streamlit as st

from mha import ui

st.title("Head atlas")
ui.show_notices()
st.info(
    "This page is being built: per-head measures (attention to [CLS]/[SEP], previous/next token, "
    "entropy) and a finder for the heads that link two words. Meanwhile, *BERT heads* shows "
    "every head of every layer and where one token attends in each head."
)
st.page_link("app_pages/bert_heads.py", label="BERT heads", icon=":material/grid_view:")
