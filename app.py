"""Multi-Head Attention Explorer: entrypoint (page config, shared sidebar, navigation, URL)."""

import os
import time

# A server runs many sessions at once on few cores: one BLAS/OpenMP thread per computation,
# set before numpy loads (threads that spin-wait for each other slow everyone down).
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import streamlit as st

from mha import ui

st.set_page_config(page_title="Multi-Head Attention Explorer", page_icon=":material/hub:", layout="wide")
# The folder is NOT named pages/: Streamlit treats a pages/ folder beside the entrypoint as the
# old multipage mode, and then reruns only the page file, not this script (the sidebar's state
# snaps back and the URL stops updating). See tests/test_browser.py.
PAGES = [
    st.Page("app_pages/overview.py", title="Overview", icon=":material/explore:", default=True),
    st.Page("app_pages/build.py", title="Build it from scratch", icon=":material/build:"),
    st.Page("app_pages/bert_heads.py", title="BERT heads", icon=":material/grid_view:"),
    st.Page("app_pages/collapse.py", title="Shared Q/K/V: collapse", icon=":material/call_merge:"),
    st.Page("app_pages/atlas.py", title="Head atlas", icon=":material/map:"),
    st.Page("app_pages/why_heads.py", title="Why many heads", icon=":material/model_training:"),
]
page = st.navigation(PAGES)
started = time.perf_counter()
ui.sidebar()
ui.sync_url()  # before the page: a page may st.stop() (empty text, nothing trained yet)
try:
    page.run()
finally:
    ui.record_timing(page.url_path or "overview", time.perf_counter() - started)
ui.sync_url()  # after: the page may have corrected a value (layer out of range, model fallback)
