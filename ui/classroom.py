"""Class mode in the app (the data and its checks are in `classroom`, this is the Streamlit side).

A student's seat token lives in the browser (the cookie COOKIE, set by the page's own script)
and on the server (the database), never only in the session: a reload, a new tab or a replica
that takes over after a crash opens a new session, which reads the cookie, finds the seat and
puts its answers and score back (and the link's "pin", the pin the page last followed, says whether
the teacher has pinned since). A seated student's sidebar checks the class every
FOLLOW_EVERY seconds and follows a new pin to the lesson. Without a seat nothing here runs.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Sequence

import sqlalchemy as sa
import streamlit as st

import classroom
from classroom import ClassError, Pin, classes
from classroom.limits import TooManyAttempts

from .state import literal, notice

NICKNAME_MAX = classes.NICKNAME_MAX
COOKIE = "mha_seat"
FOLLOW_EVERY = 2.0  # s: how soon a student's page follows the teacher's pin
SEAT_DAYS = 1  # the cookie's lifetime (a class lasts at most classes.EXPIRES)
LESSON = "app_pages/lesson.py"
CLASS_PAGE = "app_pages/classroom.py"
TROUBLE = (ClassError, TooManyAttempts, sa.exc.SQLAlchemyError, OSError)


def address() -> str:
    """The visitor's network address for the failed-attempt limit: the address nginx adds last
    to X-Forwarded-For when the request came through a proxy on this machine, else the peer's."""
    peer = st.context.ip_address
    peer = peer if isinstance(peer, str) else ""
    forwarded = st.context.headers.get("X-Forwarded-For")
    forwarded = forwarded.split(",")[-1].strip() if isinstance(forwarded, str) else ""
    try:
        local = ipaddress.ip_address(peer).is_loopback
    except ValueError:
        local = not peer
    return (forwarded if local and forwarded else peer) or "local"


def db_trouble(e: Exception) -> str:
    """What a database failure means to a reader (no traceback, no address of the database)."""
    return "The class's database is not answering: try again in a moment." if not isinstance(e, ValueError) else str(e)


def _cookie(token: str, days: float) -> None:
    """Set (or, with days=0, delete) the seat cookie in this browser."""
    js = f"document.cookie = {json.dumps(f'{COOKIE}={token}; Path=/; Max-Age={int(days * 86400)}; SameSite=Strict')};"
    st.html(f"<script>{js}</script>", unsafe_allow_javascript=True)


def seat_token() -> str | None:
    return st.session_state.get("_seat")


def apply_pin(pin: Pin) -> None:
    """The teacher's sentence, model and step become this session's (before the sidebar is drawn)."""
    ss = st.session_state
    ss.update({"model": pin.model, "text": pin.text, "text_b": "", "step": pin.step, "_class_rev": pin.revision})


def take_seat(seat: classroom.Seat, token: str) -> None:
    """This session sits in `seat`: its answers and score come back from the server."""
    ss = st.session_state
    ss["_seat"], ss["_class_rev"] = token, seat.pin.revision
    ss["_class_name"] = (seat.code, seat.nickname)
    sent = ss.setdefault("_class_sent", set())
    first = ss.setdefault("lesson_first", {})
    for a in classes.answers_of(token):  # oldest first: the score keeps each question's first answer
        first.setdefault(a.record, a.right)
        sent.add(a.qid)
        values = [int(v) for v in a.value.split(",")]
        for key, value in zip(a.keys, values if len(a.keys) > 1 else values[:1]):
            ss.setdefault(key, value)


def leave(message: str | None = None) -> None:
    """Out of the class in this browser (the server keeps the seat until the class ends)."""
    ss = st.session_state
    for key in ("_seat", "_class_rev", "_class_name", "_class_go"):
        ss.pop(key, None)
    ss["_class_left"] = True  # the cookie is deleted by the next run's script
    if message:
        notice(message)


def arrive(page: str) -> None:
    """At the top of every run, before the sidebar: a new session finds its seat from the cookie
    (and, opened without a sentence in its link, the class's pin); a pin the sidebar's check
    found new is applied, and opens the lesson."""
    ss = st.session_state
    if not ss.get("_class_checked"):
        ss["_class_checked"] = True
        token = st.context.cookies.get(COOKIE)
        if isinstance(token, str) and token:
            try:
                seat = classes.seat_of(token)
                if seat is None:
                    leave("Your class has ended: this is the app on your own again.")
                else:
                    take_seat(seat, token)
                    followed = st.query_params.get("pin", "")
                    if "text" not in st.query_params:
                        apply_pin(seat.pin)
                    elif followed.isdigit():  # the pin the page showed (a reload, a replica taken over):
                        ss["_class_rev"] = int(followed)  # a newer one is followed at the sidebar's next check
            except TROUBLE as e:
                notice(db_trouble(e))
    pin = ss.pop("_class_go", None)
    if pin is not None:
        apply_pin(pin)
        if page != "lesson":
            st.switch_page(LESSON)


def record(qid: str, keys: Sequence[str], value: int | list[int], options: Sequence[str] | None, right: bool) -> None:
    """Keep a seated student's first answer to `qid` on the server (once; nothing without a seat)."""
    ss = st.session_state
    token = seat_token()
    if not token or qid in ss.setdefault("_class_sent", set()):
        return
    try:
        classes.record_answer(token, qid, list(keys), value, options, right)
        ss["_class_sent"].add(qid)
    except ClassError as e:
        st.warning(f"Your answer was not sent to the class: {e}", icon=":material/cloud_off:")
    except TROUBLE as e:
        st.warning(f"Your answer was not sent to the class yet: {db_trouble(e)}", icon=":material/cloud_off:")


def join(code: str, nickname: str) -> classroom.Seat:
    """Join the class with `code` in this session and browser, and go to its pinned step at the
    next run. ClassError (and the database's errors) as classroom.join raises them."""
    seat = classes.join(code, nickname, address())
    take_seat(seat, seat.token)
    st.session_state["_class_go"] = seat.pin
    return seat


def start(inp) -> str:
    """A new class on `inp`'s sentence and model at step 1: the teacher's token."""
    _code, token = classes.start_class(inp.model, inp.text, 1)
    return token


def back() -> None:
    """Go to the class's pinned step (the sidebar's and the class page's button)."""
    ss = st.session_state
    try:
        seat = classes.seat_of(seat_token() or "")
    except TROUBLE as e:
        notice(db_trouble(e))
        return
    if seat is None:
        leave("Your class has ended: this is the app on your own again.")
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
        leave("Your class has ended: this is the app on your own again.")
        st.rerun()
    if seat.pin.revision != ss.get("_class_rev"):
        ss["_class_go"] = seat.pin  # the teacher pinned again: the whole page follows
        st.rerun()
    st.markdown(f"**Class {seat.code}**: you are {literal(seat.nickname, 24)}")
    st.button(
        f"Back to the class (step {seat.pin.step})",
        key="_class_back",
        on_click=back,
        icon=":material/groups:",
        width="stretch",
    )


def sidebar_status() -> None:
    """In the sidebar of a seated student: the class, the nickname, the way back; the seat's
    cookie set (or deleted after leaving)."""
    ss = st.session_state
    if ss.pop("_class_left", False):
        with st.sidebar:
            _cookie("", 0)
    token = seat_token()
    if not token:
        return
    with st.sidebar:
        _cookie(token, SEAT_DAYS)  # the same element every run: the browser runs it once
        _follow()
