"""Multi-Head Attention Explorer: entrypoint (page config, shared sidebar, navigation)."""

import os

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import streamlit as st

from mha import ui

st.set_page_config(page_title="Multi-Head Attention Explorer", page_icon="🔍", layout="wide")
ui.sentence_sidebar()
page = st.navigation([st.Page("pages/bert_heads.py", title="BERT heads", default=True)])
page.run()
