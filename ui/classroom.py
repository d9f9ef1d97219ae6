"""Class mode in the app (the data and its checks are in `classroom`, this is the Streamlit side).

A student's seat token lives in the browser (the cookie COOKIE, set by the page's own script)
and on the server (the database), never only in the session: a reload, a new tab or a replica
that takes over after a crash opens a new session, which reads the cookie, finds the seat and
puts its answers and score back (and the link's "pin", the pin the page last followed, says whether
the teacher has pinned since). A seated student's sidebar checks the class every
FOLLOW_EVERY seconds and follows a new pin to the lesson. Without a seat nothing here runs.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence

import sqlalchemy as sa
import streamlit as st

import classroom
from classroom import ClassError, Pin, classes, limits
from mha.lesson import steps

from .settings import quiz_keys, widget_key
from .state import literal, notice

NICKNAME_MAX = classes.NICKNAME_MAX
COOKIE = "mha_seat"
FOLLOW_EVERY = 2.0  # s: how soon a student's page follows the teacher's pin
SEAT_DAYS = 1  # the cookie's lifetime (a class lasts at most classes.EXPIRES)
LESSON = "app_pages/lesson.py"
TROUBLE = (ClassError, sa.exc.SQLAlchemyError, OSError, classroom.db.NotMigrated)
LEFT = "left."  # an older version's cookie after leaving: never followed, never a seat again
ENDED = "Your class has ended: this is the app on your own again."


def address() -> str:
    """The visitor's network address for counting wrong codes, as the server resolved it: the
    peer's, or what a proxy named in FORWARDED_ALLOW_IPS forwarded (classroom.limits). The
    app never reads X-Forwarded-For itself."""
    peer = st.context.ip_address
    return (peer if isinstance(peer, str) and peer else "local")[:64]


def db_trouble(e: Exception) -> str:
    """What a failure means to a reader (no traceback, no address of the database)."""
    return "The class's database is not answering: try again in a moment." if not isinstance(e, ValueError) else str(e)


def set_cookie(name: str, value: str, days: float | None, secure: bool = False) -> None:
    """Set (or, with days=0, delete) a cookie of this app in this browser (Secure: only over HTTPS);
    days=None: a session cookie, gone when the browser closes."""
    age = "" if days is None else f"; Max-Age={int(days * 86400)}"
    flags = f"Path=/{age}; SameSite=Strict" + ("; Secure" if secure else "")
    js = f"document.cookie = {json.dumps(f'{name}={value}; {flags}')};"
    st.html(f"<script>{js}</script>", unsafe_allow_javascript=True)


def seat_token() -> str | None:
    return st.session_state.get("_seat")


def teacher_view_open(page: str) -> bool:
    """This run draws the teacher's view (its page, with a teacher link or the teacher's mark)."""
    return page == "classroom" and ("teacher" in st.query_params or st.query_params.get("teach") == "1")


def apply_pin(pin: Pin) -> None:
    """The teacher's sentence, model and step become this session's (before the sidebar is drawn)."""
    ss = st.session_state
    ss.update({"model": pin.model, "text": pin.text, "text_b": "", "step": pin.step, "_class_rev": pin.revision})
    # and the sidebar's boxes themselves: a run that switches pages draws no widget, so the browser's
    # boxes would keep the old sentence and send it back at the student's next click
    ss.update({widget_key("model"): pin.model, widget_key("text"): pin.text, widget_key("text_b"): ""})


def _forget_answers() -> None:
    """This session's lesson answers and score out (another seat's are put back next)."""
    ss = st.session_state
    for key in quiz_keys():
        del ss[key]
    ss["lesson_first"], ss["_class_sent"] = {}, {}


def restore_score() -> None:
    """The score from the server: each question's first answer, as the class keeps it."""
    first = st.session_state.setdefault("lesson_first", {})
    for a in classes.answers_of(seat_token() or ""):  # oldest first
        first.setdefault(a.record, a.right)


def take_seat(seat: classroom.Seat, token: str) -> None:
    """This session sits in `seat`: its answers (as last shown) and score come back from the server."""
    ss = st.session_state
    if ss.get("_seat") != token:
        _forget_answers()  # another class's answers (or a lone learner's) are not this seat's
    ss["_seat"], ss["_class_rev"] = token, seat.pin.revision
    ss["_class_name"] = (seat.code, seat.nickname)
    sent = ss.setdefault("_class_sent", {})
    first = ss.setdefault("lesson_first", {})
    for a in classes.answers_of(token):  # oldest first: the score keeps each question's first answer
        first.setdefault(a.record, a.right)
        sent[a.qid] = a.latest
        values = [int(v) for v in a.latest.split(",")]
        for key, value in zip(a.keys, values if len(a.keys) > 1 else values[:1]):
            ss.setdefault(key, value)


def leave(message: str | None = None) -> None:
    """Out of the class in this browser: the seat's cookie is deleted, so that nothing hands the
    seat to whoever uses this browser next (a shared lab PC). The server keeps the seat and its
    answers for the teacher until the class ends; joining again is a new seat."""
    ss = st.session_state
    for key in ("_seat", "_class_rev", "_class_name", "_class_go"):
        ss.pop(key, None)
    ss["_class_left"] = ""  # the next run's script deletes the cookie
    if message:
        notice(message)


def arrive(page: str) -> None:
    """At the top of every run, before the sidebar: a new session finds its seat from the cookie
    (and, opened without a sentence in its link, the class's pin); a pin the sidebar's check
    found new is applied, and opens the lesson. Not on the teacher's view."""
    ss = st.session_state
    if teacher_view_open(page):
        return
    if not ss.get("_class_checked"):
        ss["_class_checked"] = True
        token = st.context.cookies.get(COOKIE)
        if isinstance(token, str) and token and not token.startswith(LEFT):
            try:
                seat = classes.seat_of(token)
                if seat is None:
                    leave(ENDED)
                else:
                    take_seat(seat, token)
                    followed = st.query_params.get("pin", "")
                    if "text" not in st.query_params:
                        apply_pin(seat.pin)
                    elif re.fullmatch(r"[0-9]{1,9}", followed):  # the pin the page showed (a reload, a failover):
                        ss["_class_rev"] = int(followed)  # a newer one is followed at the sidebar's next check
            except TROUBLE as e:
                notice(db_trouble(e))
    pin = ss.pop("_class_go", None)
    if pin is not None:
        apply_pin(pin)
        if page != "lesson":
            st.switch_page(LESSON)


def record(
    qid: str,
    keys: Sequence[str],
    value: int | list[int],
    options: Sequence[str] | None,
    right: bool,
    expected: Sequence[str],
    version: str = "",
) -> None:
    """A seated student's answer to `qid` on the server: the first one for the class, a changed
    one as the answer to put back after a reload (nothing without a seat)."""
    ss = st.session_state
    token = seat_token()
    if not token:
        return
    sent = ss.setdefault("_class_sent", {})
    shown = ",".join(map(str, value if isinstance(value, list) else [value]))
    if sent.get(qid) == shown:
        return
    inp = ss.get("_inputs")
    try:
        classes.record_answer(token, qid, list(keys), value, options, right, expected, version, inp.text if inp else "")
        sent[qid] = shown
    except ClassError as e:
        st.warning(f"Your answer was not sent to the class: {e}", icon=":material/cloud_off:")
    except TROUBLE as e:
        st.warning(f"Your answer was not sent to the class yet: {db_trouble(e)}", icon=":material/cloud_off:")


def join(code: str, nickname: str) -> classroom.Seat:
    """Join the class with `code` in this session and browser (the browser's seat in that class,
    if it has one), and go to its pinned step at the next run. ClassError (and the database's
    errors) as classroom.join raises them; a wrong code makes this session's next try wait."""
    ss = st.session_state
    kept = ss.get("_seat") or st.context.cookies.get(COOKIE) or ""
    kept = kept if isinstance(kept, str) and not kept.startswith(LEFT) else ""
    failed = ss.get("_class_failed", 0)
    waiting = st.spinner("Wrong codes were typed here: checking this one takes a moment ...", show_time=True)
    with waiting if failed >= limits.FREE_TRIES else contextlib.nullcontext():
        try:
            seat = classes.join(code, nickname, address(), failed=failed, kept=kept)
        except classes.WrongCode:
            ss["_class_failed"] = failed + 1
            raise
    ss.pop("_class_failed", None)
    take_seat(seat, seat.token)
    ss["_class_go"] = seat.pin
    return seat


def start(inp) -> str:
    """A new class on `inp`'s sentence and model at step 1: the teacher's token."""
    _code, token = classes.start_class(inp.model, inp.text, steps.KEYS[0])
    return token


def back() -> None:
    """Go to the class's pinned step at the next run (the sidebar's and the class page's button)."""
    ss = st.session_state
    try:
        seat = classes.seat_of(seat_token() or "")
    except TROUBLE as e:
        notice(db_trouble(e))
        return
    if seat is None:
        leave(ENDED)
    else:
        ss["_class_go"] = seat.pin


@st.fragment(run_every=FOLLOW_EVERY)
def _follow() -> None:
    ss = st.session_state
    token = seat_token()
    if not token:
        return
    try:
        seat = classes.seat_of(token)
    except TROUBLE as e:
        st.caption(db_trouble(e))
        return
    if seat is None:
        leave(ENDED)
        st.rerun()
    if seat.pin.revision != ss.get("_class_rev"):
        ss["_class_go"] = seat.pin  # the teacher pinned again: the whole page follows
        st.rerun()
    st.markdown(f"**Class {seat.code}**: you are {literal(seat.nickname, 24)}")
    if st.button(
        f"Back to the class (step {steps.number(seat.pin.step)})", key="_class_back", icon=":material/groups:"
    ):
        back()
        st.rerun()  # the whole page, not only this part: the pin is applied before the sidebar


def sidebar_status(page: str) -> None:
    """In the sidebar of a seated student: the class, the nickname, the way back; the seat's
    cookie set (or deleted after leaving). Nothing on the teacher's view."""
    ss = st.session_state
    if ss.pop("_class_left", None) is not None:
        with st.sidebar:
            set_cookie(COOKIE, "", 0)
    token = seat_token()
    if not token or teacher_view_open(page):
        return
    with st.sidebar:
        set_cookie(COOKIE, token, SEAT_DAYS)  # the same element every run: the browser runs it once
        _follow()
