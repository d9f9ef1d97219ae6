"""The teacher's view, made for a projector (no sidebar, large black text): the class code to
join with, the pin (sentence, model, step) and buttons to move everyone a step, and live, for the
pinned step: how many answered, the histogram of first answers (anonymous; the right answer only
on request), the class's score per question, the CSV of every nickname's answers and the end."""

from __future__ import annotations

import streamlit as st

from classroom import ClassError, classes, report
from mha import bert, plots, steps

from .classroom import TROUBLE, address, db_trouble
from .quiz import question_tag
from .state import Inputs, literal
from .widgets import chart

LIVE_EVERY = 2.0  # s: how often the projector's counts and histogram are read again
PROJECTOR = """<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"] {
  display: none !important;
}
[data-testid="stMainBlockContainer"] { max-width: 1400px; }
[data-testid="stMainBlockContainer"] p, [data-testid="stMainBlockContainer"] li,
[data-testid="stMainBlockContainer"] label p, [data-testid="stMainBlockContainer"] td,
[data-testid="stMainBlockContainer"] th { font-size: 1.35rem; color: #000; }
</style>"""


def _step_title(n: int) -> str:
    return f"Step {n}: {steps.STEPS[n - 1].title}"


def _pin(token: str, model: str, text: str, step: int) -> None:
    try:
        classes.pin(token, model, text, step, address())
        st.session_state["_teacher_said"] = ("success", f"Pinned for everyone: step {step}.")
    except TROUBLE as e:
        st.session_state["_teacher_said"] = ("error", db_trouble(e))


def _end(token: str) -> None:
    try:
        classes.end_class(token, address())
        st.session_state["_teacher_said"] = ("success", "The class has ended: its answers are deleted.")
        st.query_params.pop("teacher", None)
    except TROUBLE as e:
        st.session_state["_teacher_said"] = ("error", db_trouble(e))


def view(token: str) -> None:
    """The whole teacher view of the class `token` opens, or a message if it opens none."""
    st.html(PROJECTOR)
    said = st.session_state.pop("_teacher_said", None)
    if said:
        getattr(st, said[0])(said[1])
    try:
        found = classes.teacher_class(token, address())
    except TROUBLE as e:
        st.error(db_trouble(e) if not isinstance(e, ClassError) else str(e), icon=":material/lock:")
        return
    code, pin = found.code, found.pin
    st.title(f"Class {code[:4]} {code[4:]}")
    here = st.context.url if isinstance(st.context.url, str) else ""  # this page's address, without the query
    join = f" (or open {here}?join={code})" if here.startswith("http") else ""
    st.markdown(
        f"Students: open this app's **Class** page and type the code **{code[:4]} {code[4:]}** "
        f"with a nickname{join}. This page's link is yours alone: it steers the class and shows its answers."
    )
    with st.expander("Your teacher link (private: do not open this on the projector)", icon=":material/key:"):
        st.code(f"{here}?teacher={token}" if here.startswith("http") else f"/classroom?teacher={token}", language=None)
        st.caption("Bookmark it to come back to this class (it ends on its own 24 hours after it started).")
    back, forward = st.columns(2)
    back.button(
        "← Everyone to the step before",
        disabled=pin.step == 1,
        on_click=_pin,
        args=(token, pin.model, pin.text, pin.step - 1),
        key="teacher_back",
        width="stretch",
    )
    forward.button(
        "Everyone to the next step →",
        disabled=pin.step == len(steps.STEPS),
        on_click=_pin,
        args=(token, pin.model, pin.text, pin.step + 1),
        key="teacher_next",
        type="primary",
        width="stretch",
    )
    with st.expander("Pin another sentence, model or step", icon=":material/push_pin:"):
        with st.form("teacher_pin"):
            text = st.text_area("Sentence for the class", value=pin.text, max_chars=bert.MAX_CHARS, key="teacher_text")
            names = [s.name for s in bert.available_models()]
            model = st.selectbox("Model", names, index=names.index(pin.model), key="teacher_model")
            step = st.selectbox(
                "Step", range(1, len(steps.STEPS) + 1), index=pin.step - 1, format_func=_step_title, key="teacher_step"
            )
            if st.form_submit_button("Pin for everyone", type="primary"):
                _pin(token, model, text, step)
                st.rerun()
    live(token)
    with st.expander("End the class", icon=":material/stop_circle:"):
        st.markdown(
            "Ending the class deletes its pin, its students' nicknames and every answer. Download the CSV first."
        )
        sure = st.checkbox("Yes, end this class and delete its data", key="teacher_sure")
        st.button("End the class", disabled=not sure, on_click=_end, args=(token,), key="teacher_end")


@st.fragment(run_every=LIVE_EVERY)
def live(token: str) -> None:
    """The part of the view read again every LIVE_EVERY seconds."""
    try:
        found = classes.teacher_class(token, address())
    except TROUBLE as e:
        st.warning(db_trouble(e))
        return
    pin = found.pin
    st.subheader(_step_title(pin.step))
    st.markdown(f"On: *{literal(pin.text, 120)}* ({pin.model}). {len(found.nicknames)} students joined.")
    tag = question_tag(Inputs.from_raw(pin.model, pin.text), pin.step)
    asked = [r for r in steps.QUESTIONS if r.startswith(f"{pin.step}-")]
    shown = report.histograms(found, tag)
    if not asked:
        st.info("This step asks no question.")
    elif not shown:
        st.info(f"0 of {len(found.nicknames)} students answered this step's question yet.")
    reveal = bool(asked) and st.toggle("Show the right answer", key="teacher_reveal")
    for h in shown:
        record = f"{pin.step}-{h.qid.rsplit('-', 1)[1]}"
        question = steps.QUESTIONS.get(record, record)
        version = f" ({h.variant})" if h.variant else ""
        st.markdown(
            f"**{h.answered} of {len(found.nicknames)} students answered**{version}: {question.split(': ', 1)[-1]}"
        )
        title = "First answers" + (f": {h.variant}" if h.variant else "")
        chart(
            plots.classroom.answers_histogram(h.labels, h.counts, h.right, reveal, title),
            key=f"teacher_hist_{h.qid}_{h.variant}",
        )
    st.subheader("The class's score per question")
    rows = report.scores(found)
    st.markdown(
        "| question | right at the first answer |\n|---|---|\n" + "\n".join(f"| {q} | {r} of {n} |" for q, r, n in rows)
    )
    with st.expander(f"Who joined ({len(found.nicknames)})", icon=":material/group:"):
        st.text(", ".join(found.nicknames) or "No one yet.")  # literal text: a nickname is never markup
    st.download_button(
        "Download every answer (CSV)",
        report.answers_csv(found),
        file_name=f"class-{found.code}.csv",
        mime="text/csv",
        key="teacher_csv",
        icon=":material/download:",
    )
