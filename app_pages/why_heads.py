"""Why many heads: train tiny models live (full page in a later release)."""

import streamlit as st

from mha import ui

st.title("Why many heads")
ui.show_notices()
st.info(
    "This page is being built: three tiny models (one head, shared heads, distinct heads) "
    "trained live on a task that needs several relations at once. Vaswani et al. 2017 "
    "(Table 3, rows A) report single-head attention 0.9 BLEU below the best head count."
)
st.page_link("app_pages/overview.py", label="Overview", icon=":material/explore:")
