"""The only module that imports Streamlit: cached loaders and the shared sidebar state.

The model is loaded once per process (st.cache_resource) and shared read-only by every
session; per-sentence results are cached by value (st.cache_data, bounded).
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import streamlit as st

from mha import bert

DEFAULT_TEXT = "The mole on his arm was not a mole but a rare insect."


@st.cache_resource(show_spinner=False, max_entries=2)
def load_model(name: str) -> bert.LoadedBert:
    """The shared, read-only model (one per process)."""
    return bert.load_bert(name)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_run(model_name: str, text: str, text_b: str | None = None) -> bert.BertRun:
    """BERT's attentions and hidden states for one sentence (or pair), cached by value."""
    return load_model(model_name).attend(text, text_b)


def get_model() -> bert.LoadedBert:
    """Load the chosen model with a visible status the first time."""
    name = st.session_state.get("model", bert.DEFAULT_MODEL)
    with st.spinner(f"Loading {name} (first time only)..."):
        return load_model(name)


def sentence_sidebar() -> None:
    """The sentence box, kept in a plain session_state key so it survives page switches."""
    st.session_state.setdefault("text", DEFAULT_TEXT)
    st.session_state.setdefault("model", bert.DEFAULT_MODEL)

    def _keep() -> None:
        st.session_state["text"] = st.session_state["_text_box"]

    st.sidebar.text_area("Sentence", value=st.session_state["text"], key="_text_box",
                         on_change=_keep, height=110)


def current_run() -> bert.BertRun | None:
    """The run for the sidebar sentence, or None (with a message in the page) if it is unusable."""
    text = st.session_state.get("text", DEFAULT_TEXT)
    if not text.strip():
        st.info("Type a sentence in the sidebar to see its attention.")
        return None
    model = get_model()
    with st.spinner("Running BERT..."):
        return cached_run(model.name, text)
