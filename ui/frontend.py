"""Where the app reaches past Streamlit's public API into its front end, all in one place.

- `plotly_module()`: the file of Streamlit's Plotly chart module (its name carries a build hash),
  which `preload_plotly` imports when a page opens, so a page whose first chart waits for an
  answer (the lesson's step 1) does not load 4.7 MB of JavaScript between the click and the chart.
- `TEST_IDS`: the `data-testid` attributes that ui/style.css styles (Streamlit's names for its
  elements, not an API); `PROJECTOR_IDS` and `PROJECTOR`: the teacher's view without the sidebar
  and in large black text (ui/teacher.py).

tests/test_frontend.py checks both against the installed Streamlit (requirements.txt pins it):
an upgrade that renames a test id or moves the chart module fails there, by name, before a page
looks wrong. Nothing else in the app names Streamlit's files or test ids.
"""

from __future__ import annotations

import functools
from pathlib import Path

import streamlit as st

TEST_IDS = (
    "stMainBlockContainer",  # spacing above each title
    "stPlotlyChart",  # a phone's chart titles and toolbar
    "InputInstructions",  # "Press Enter to apply", hidden on a phone
    "stMetricLabel",  # metric labels that wrap
    "stMetricDelta",  # metric deltas that wrap (a change with its interval)
    "stPageLink",  # page links that wrap
    "stElementContainer",  # the hidden element of ui.scroll_top
)


PROJECTOR_IDS = ("stSidebar", "stExpandSidebarButton", "stMainBlockContainer")
PROJECTOR = """<style>
[data-testid="stSidebar"], [data-testid="stExpandSidebarButton"] { display: none !important; }
[data-testid="stMainBlockContainer"] { max-width: 1400px; }
[data-testid="stMainBlockContainer"] :is(p, li, label p, td, th, pre) { font-size: 1.35rem; }
[data-testid="stMainBlockContainer"] :is(p, li, td, th, pre):not(button *) { color: #000; }
[data-testid="stMainBlockContainer"] p.mha-pinned { font-size: 1.75rem; line-height: 1.3; margin: 0; }
</style>"""  # large black text, but a button keeps its own colours (black on a red button fails contrast)


def static_js() -> Path:
    """The folder of Streamlit's front-end JavaScript modules."""
    return Path(st.__file__).parent / "static" / "static" / "js"


@functools.cache
def plotly_module() -> str | None:
    """The file name of Streamlit's Plotly chart module, or None when it is not found."""
    found = sorted(static_js().glob("PlotlyChart.*.js"))
    return found[0].name if found else None


def preload_plotly() -> None:
    """Import the Plotly chart module in the browser now (nothing is drawn; a failure is ignored)."""
    if module := plotly_module():
        st.html(f'<script>import("./static/js/{module}").catch(() => {{}})</script>', unsafe_allow_javascript=True)
