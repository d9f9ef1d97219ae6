"""bench/bench_firstpaint.py's second reference: bench/bare_page.py at a page's own address
(/bare) of a two-page app with no navigation drawn, as the app's pages are (/bert_heads). A fresh
visit to such an address first asks /bare/_stcore/health, then /_stcore/health (Streamlit's
frontend looks for the server's base path): what any Streamlit page at its own address pays."""

import streamlit as st


def home() -> None:
    st.title("Home")


st.navigation(
    [st.Page(home, title="Home", default=True), st.Page("bare_page.py", title="A bare page", url_path="bare")],
    position="hidden",
).run()
