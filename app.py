"""Multi-Head Attention Explorer: entrypoint (page config, shared sidebar, navigation, URL)."""

import os

# A server runs many sessions at once on few cores: one BLAS/OpenMP thread per computation,
# set before numpy loads (threads that spin-wait for each other slow everyone down).
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import streamlit as st  # noqa: E402

import ui  # noqa: E402
from ui import classroom, progress, server, warm  # noqa: E402
from ui.pages import DEFAULT, PAGES  # noqa: E402

server.configure()
# the icon is a file served by the app itself: a :material/...: page icon is fetched from a font CDN
st.set_page_config(page_title="Multi-Head Attention Explorer", page_icon=server.ICON, layout="wide")
st.html(server.STYLE)
page = st.navigation([st.Page(p.path, title=p.title, icon=p.icon, default=p is DEFAULT) for p in PAGES])
name = page.url_path or DEFAULT.url_path  # the default page's own path is ""
with server.timed(name):
    ui.init_state()
    classroom.arrive(name)  # a class's student: the seat from the cookie, the teacher's pin followed
    progress.restore()  # a lone learner's score, kept by this browser for the session
    inputs = ui.sidebar()  # this rerun's one Inputs: pages read it with ui.inputs()
    ui.sync_url(inputs, name)  # before the page: a page may st.stop() (empty text, nothing trained yet)
    classroom.sidebar_status(name)  # nothing without a seat
    inputs = ui.ensure_model(inputs)  # loads the model once per process; falls back if it cannot
    if st.session_state.get("_page") != name:  # another page opens at its top, not where the last was scrolled
        st.session_state["_page"] = name
        st.session_state["_page_visits"] = st.session_state.get("_page_visits", 0) + 1
        ui.scroll_here_done()
    ui.scroll_top(f"page-{st.session_state['_page_visits']}")
    try:
        page.run()
    finally:
        server.release_memory()  # what script runs freed goes back to the system (at most every 2 s)
        warm.start(inputs.model)  # after the first page: the bundled model's one-time results, in the background
        progress.save()  # the score, if this run's answers changed it
ui.sync_url(inputs, name)  # after: the page may have corrected a value (layer or head out of range)
