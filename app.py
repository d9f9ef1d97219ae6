"""Multi-Head Attention Explorer: entrypoint (page config, shared sidebar, navigation, URL)."""

import os

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import streamlit as st

from mha import ui

st.set_page_config(page_title="Multi-Head Attention Explorer", page_icon=":material/hub:", layout="wide")
PAGES = {
    "overview": st.Page("pages/overview.py", title="Overview", icon=":material/explore:", default=True),
    "build": st.Page("pages/build.py", title="Build it from scratch", icon=":material/build:", url_path="build"),
    "bert_heads": st.Page("pages/bert_heads.py", title="BERT heads", icon=":material/grid_view:", url_path="bert_heads"),
    "collapse": st.Page("pages/collapse.py", title="Shared Q/K/V: collapse", icon=":material/call_merge:", url_path="collapse"),
    "atlas": st.Page("pages/atlas.py", title="Head atlas", icon=":material/map:", url_path="atlas"),
    "why_heads": st.Page("pages/why_heads.py", title="Why many heads", icon=":material/model_training:", url_path="why_heads"),
}
page = st.navigation(list(PAGES.values()))
ui.sidebar()
page.run()
ui.sync_url()
