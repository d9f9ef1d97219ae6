"""Shared Q/K/V: the lesson's check question on real weights (full page in a later release)."""

import streamlit as st

from mha import ui

st.title("Shared Q/K/V: watch the heads collapse")
ui.show_notices()
st.info(
    "This page is being built. Meanwhile, the **shared** toggle on *Build it from scratch* "
    "already gives every head one W^Q, W^K, W^V and shows that all heads then compute the same map."
)
st.page_link("app_pages/build.py", label="Build it from scratch", icon=":material/build:")
