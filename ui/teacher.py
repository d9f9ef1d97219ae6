"""The teacher's view, made for a projector (no sidebar, large black text): the class code to
join with, the pin (sentence, model, step) and buttons to move everyone a step, and live, for the
pinned step: how many answered, the histogram of first answers (anonymous; the right answer only
on request), the class's score per question, the CSV of every nickname's answers and the end.

The teacher's key (the class's 192-bit token) never travels in an address, so no proxy or server
log can hold it: the view opens from the Class page (the key typed or pasted into a form, or
right after starting the class) and keeps it in the session and in a cookie of the teacher's
browser (TEACHER_COOKIE) that lasts as long as the class, not longer; the address bar shows
`?teach=1`. "Leave the teacher view" and ending the class delete the cookie (a shared projector
PC keeps nothing). The cookie is set by the page's script, so it cannot be HttpOnly; it is
SameSite=Strict, and Secure where the app is served over HTTPS."""

from __future__ import annotations

import html
import os
import time

import streamlit as st

from classroom import ClassError, classes, report
from mha import plots
from mha.lesson import steps
from mha.models import catalog

from . import frontend
from .classroom import TROUBLE, address, db_trouble, set_cookie
from .quiz import question_tag
from .state import Inputs, notice
from .widgets import chart

LIVE_EVERY = 2.0  # s: how often the projector's counts and histogram are read again
TEACHER_COOKIE = "mha_teacher"


def token() -> str | None:
    """The teacher's key of this view: from this session or the teacher's cookie (an address with
    `teach=1`); None if the page is not the teacher's view. A `?teacher=` link (the old way, which
    put the key in logged addresses) opens nothing: it is taken out of the address, with a notice."""
    ss, qp = st.session_state, st.query_params
    if "teacher" in qp:
        del qp["teacher"]
        notice("Teacher links are not used any more (an address ends up in logs): open your class with its key.")
    if qp.get("teach") == "1" and not ss.get("_teacher"):
        kept = st.context.cookies.get(TEACHER_COOKIE)
        if isinstance(kept, str) and kept:
            ss["_teacher"] = kept[:100]
    return ss.get("_teacher", "") if qp.get("teach") == "1" else None


def open_view(key: str) -> None:
    """Open the teacher view of the class `key` steers (the Class page's form); ClassError if none."""
    classes.teacher_class(key.strip()[:100])  # raises for a key that opens no class
    st.session_state["_teacher"] = key.strip()[:100]
    st.session_state.pop("_teacher_ended", None)
    st.query_params["teach"] = "1"


def kept_class() -> str | None:
    """The code of the open class whose key this browser's teacher cookie holds, or None."""
    kept = st.context.cookies.get(TEACHER_COOKIE)
    if not isinstance(kept, str) or not kept:
        return None
    try:
        return classes.teacher_class(kept[:100]).code
    except TROUBLE:
        return None


def reopen() -> None:
    """Open the teacher view of the class the browser's cookie holds (the Class page's button)."""
    st.session_state.pop("_teacher_ended", None)
    st.query_params["teach"] = "1"


def _https() -> bool:
    url = st.context.url if isinstance(st.context.url, str) else ""
    return url.startswith("https:") or st.context.headers.get("X-Forwarded-Proto") == "https"


def leave() -> None:
    """This browser leaves the teacher view: the key out of the session, the cookie deleted."""
    st.session_state.pop("_teacher", None)
    st.session_state["_teacher_forget"] = True
    st.query_params.pop("teach", None)
    notice("You left the teacher view: this browser keeps nothing of the class. Open it again with its key.")


def forget_cookie() -> None:
    """After leaving or ending: the teacher's cookie deleted by this run's script."""
    if st.session_state.pop("_teacher_forget", False):
        set_cookie(TEACHER_COOKIE, "", 0)


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _step_title(key: str) -> str:
    n = steps.number(key)
    return f"Step {n}: {steps.STEPS[n - 1].title}"


def _pin(secret: str, model: str, text: str, step: str) -> None:
    from .cache import load_model

    try:
        load_model(model)  # a model the students' pages cannot load here would hide their answers
    except Exception as e:  # noqa: BLE001 (any failure to load: the message names it)
        st.session_state["_teacher_said"] = ("error", f"{model} cannot be loaded on this server ({e}): pick another.")
        return
    try:
        done = classes.pin(secret, model, text, step, address())
        st.session_state["_teacher_said"] = (
            "success",
            f"Pinned for everyone: step {steps.number(step)} (pin {done.revision}).",
        )
    except TROUBLE as e:
        st.session_state["_teacher_said"] = ("error", db_trouble(e))


def _lock(secret: str, locked: bool) -> None:
    try:
        classes.lock(secret, locked)
    except TROUBLE as e:
        st.session_state["_teacher_said"] = ("error", db_trouble(e))


def _remove(secret: str, nickname: str) -> None:
    try:
        gone = classes.remove_seat(secret, nickname)
    except TROUBLE as e:
        st.session_state["_teacher_said"] = ("error", db_trouble(e))
        return
    st.toast(f"Removed {nickname[:24]}." if gone else "That seat was already gone.")


def _end(secret: str) -> None:
    try:
        classes.end_class(secret, address())
    except TROUBLE as e:
        st.session_state["_teacher_said"] = ("error", db_trouble(e))
        return
    st.session_state.pop("_teacher", None)
    st.session_state["_teacher_ended"] = st.session_state["_teacher_forget"] = True
    for key in ("teacher", "teach"):
        st.query_params.pop(key, None)
    notice("The class has ended: its pin, nicknames and answers are deleted.")


def view(secret: str) -> None:
    """The whole teacher view of the class `secret` opens, or a message if it opens none."""
    st.html(frontend.PROJECTOR)
    said = st.session_state.pop("_teacher_said", None)
    if said:  # a pin made: a toast (a banner would push the histogram below the projector's first screen)
        st.toast(said[1], icon=":material/push_pin:") if said[0] == "success" else st.error(said[1])
    try:
        found = classes.teacher_class(secret, address())
    except TROUBLE as e:
        st.error(db_trouble(e) if not isinstance(e, ClassError) else str(e), icon=":material/lock:")
        return
    left = max(found.expires - time.time(), 0) / 86400  # days: the cookie ends with the class
    set_cookie(TEACHER_COOKIE, secret, left, secure=_https())  # a reload of `?teach=1` finds the class again
    code, pin = found.code, found.pin
    n = steps.number(pin.step)
    # the first screen of a 1280 x 720 projector: the code and the moves, then the step, the
    # sentence, the counts and the histogram; everything else below
    title, moves = st.columns([1, 1.2], vertical_alignment="center")
    title.title(f"Class {code[:4]} {code[4:]}")
    back, forward = moves.columns([1, 1.5])  # a move that cannot be made is not drawn (a greyed button is hard to read)
    if n > 1:
        back.button(
            "← Step before",
            on_click=_pin,
            args=(secret, pin.model, pin.text, steps.KEYS[n - 2]),
            key="teacher_back",
            width="stretch",
            help="Everyone to the step before",
        )
    if n < len(steps.STEPS):
        forward.button(
            "Everyone to the next step →",
            on_click=_pin,
            args=(secret, pin.model, pin.text, steps.KEYS[n]),
            key="teacher_next",
            type="primary",
            width="stretch",
        )
    public = os.environ.get("MHA_PUBLIC_URL", "").rstrip("/")  # the address students type (deploy/school.sh)
    here = f"{public}/classroom" if public else st.context.url if isinstance(st.context.url, str) else ""
    join = f", or open {here}?join={code}" if here.startswith("http") else ""
    st.markdown(f"Students: the **Class** page, code **{code[:4]} {code[4:]}**{join}.")
    live(secret)
    with st.expander("Pin another sentence, model or step", icon=":material/push_pin:"):
        with st.form("teacher_pin"):
            text = st.text_area("Sentence for the class", value=pin.text, key="teacher_text")
            names = [s.name for s in catalog.available_models()]
            model = st.selectbox("Model", names, index=names.index(pin.model), key="teacher_model")
            step = st.selectbox("Step", steps.KEYS, index=n - 1, format_func=_step_title, key="teacher_step")
            if st.form_submit_button("Pin for everyone", type="primary"):
                _pin(secret, model, text, step)
                st.rerun()
    with st.expander("Open this class on another device (private)", icon=":material/key:"):
        st.markdown(
            "Only this browser, and a device you open the class on with this key, steers the class and sees its "
            "answers. Keep the key to yourself: on another device, open this app's **Class** page and paste it "
            "under *Open a class you teach*. It is never put in an address."
        )
        # projected, the key would be anyone's with a phone: it is drawn only when asked for
        if st.toggle("Show the key on this screen (turn the projector off first)", key="teacher_show_key"):
            st.code(secret, language=None)
    st.button(
        "Leave the teacher view",
        on_click=leave,
        key="teacher_leave",
        icon=":material/logout:",
        help="This browser forgets the class (a shared projector PC): the class goes on; open it again with its key.",
    )
    with st.popover("End the class", icon=":material/stop_circle:"):
        st.markdown(
            "Ending the class deletes its pin, its students' nicknames and every answer. Download the CSV first."
        )
        st.button("End the class and delete its data", on_click=_end, args=(secret,), key="teacher_end", type="primary")


def pinned_truth(inp: Inputs, tag: str) -> report.Truth:
    """The pinned sentence's questions as this server computes them (ui.lesson_steps.truth): the
    histogram's options and right answers are the pin's, not a student's session's."""
    from . import cache, lesson_steps

    c = lesson_steps.StepContext(inp, cache.cached_run(inp), cache.load_model(inp.model), tag)
    return lambda record, variant: lesson_steps.truth(c, record, variant)


@st.fragment(run_every=LIVE_EVERY)
def live(secret: str) -> None:
    """The part of the view read again every LIVE_EVERY seconds."""
    if st.session_state.get("_teacher_ended"):
        return
    try:
        found = classes.teacher_class(secret, address())
    except ClassError:  # ended (in another tab, or it expired): the whole view says so
        st.rerun(scope="app")
    except TROUBLE as e:
        st.warning(db_trouble(e))
        return
    pin, joined = found.pin, len(found.nicknames)
    st.markdown(  # the pin as the database has it now: a pin that did not happen shows here within 2 s
        f"**{_step_title(pin.step)}** · {_plural(joined, 'student', 'students')} joined · {pin.model} · "
        f"pin {pin.revision}"
    )
    shown_text = pin.text[:600] + ("..." if len(pin.text) > 600 else "")
    st.html(f'<p class="mha-pinned">{html.escape(shown_text)}</p>')  # literal: no markup, no link; large
    inp = Inputs.from_raw(pin.model, pin.text)
    tag = question_tag(inp, pin.step)
    asked = [r for r in steps.QUESTIONS if r.startswith(f"{pin.step}:")]
    shown = report.histograms(found, tag, pinned_truth(inp, tag)) if asked else []
    if not asked:
        st.info("This step asks no question.")
    elif not shown:
        st.info(f"No answer yet from the {_plural(joined, 'student', 'students')} of the class.")
    # a new pin starts hidden again
    reveal = bool(asked) and st.toggle("Show the right answer", key=f"teacher_reveal_{pin.revision}")
    versions, answers = report.unshown(found, tag, shown)
    if versions:
        st.caption(
            f"{_plural(answers, 'answer', 'answers')} on {_plural(versions, 'other version', 'other versions')} of "
            f"the question (another token, layer or heads) not drawn: the {report.SHOWN} most answered are."
        )
    for h in shown:
        question = steps.QUESTIONS[h.record].split(": ", 1)[-1]
        question = question.replace("Q_i", "Q<sub>i</sub>").replace("W^Q", "W<sup>Q</sup>")
        question = question.replace("W^K", "W<sup>K</sup>").replace("W^V", "W<sup>V</sup>")
        version = f" ({h.variant})" if h.variant else ""
        title = f"{h.answered} of {joined} answered{version}: {question}"
        chart(
            plots.classroom.answers_histogram(h.labels, h.counts, h.right, reveal, title),
            key=f"teacher_hist_{h.qid}_{h.variant}",
        )
    st.header("The class's score per question")
    rows = report.scores(found)
    st.markdown(
        "| question | right at the first answer |\n|---|---|\n" + "\n".join(f"| {q} | {r} of {n} |" for q, r, n in rows)
    )
    with st.expander(f"Who joined ({joined})" + (", locked" if found.locked else ""), icon=":material/group:"):
        st.text(", ".join(found.nicknames) or "No one yet.")  # literal text: a nickname is never markup
        st.toggle(
            "Lock the class: no new seats",
            value=found.locked,
            key=f"teacher_lock_{found.locked}",
            on_change=_lock,
            args=(secret, not found.locked),
            help="Everyone who joined keeps their seat (also after a reload); a new browser or a script cannot join.",
        )
        if found.nicknames:
            who = st.selectbox("Remove a seat (and its answers)", found.nicknames, index=None, key="teacher_who")
            if who is not None:
                st.button(f"Remove {who[:24]}", key="teacher_remove", on_click=_remove, args=(secret, who))
    st.download_button(
        "Download every answer (CSV)",
        report.answers_csv(found),
        file_name=f"class-{found.code}.csv",
        mime="text/csv",
        key="teacher_csv",
        icon=":material/download:",
    )
