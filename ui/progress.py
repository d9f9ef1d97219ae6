"""The lesson's score kept in the browser for the session: a new tab or a reload of the app (a link
opened anew) finds the first answers it had (cookie PROGRESS, a session cookie: gone when the browser
closes, so a shared lab PC does not hand one learner's score to the next). A class's student keeps
the score on the server instead (ui.classroom), so the cookie is neither read nor written there.

The cookie is the learner's own input: only known questions (mha.lesson.steps.QUESTIONS) with 0 or 1
are read back, at most one entry per question, and it changes nothing but this session's score."""

from __future__ import annotations

import re

import streamlit as st

from mha.lesson import steps

from .classroom import seat_token, set_cookie

PROGRESS = "mha_lesson"
ENTRY = re.compile(r"([a-z-]+:[a-z]+)=([01])")


def encode(first: dict[str, bool]) -> str:
    """The first answers as the cookie keeps them: "one-query:spread=1.stages:q=0" (cookie-safe)."""
    return ".".join(f"{record}={int(bool(right))}" for record, right in first.items() if record in steps.QUESTIONS)


def decode(value: object) -> dict[str, bool]:
    """The first answers a cookie value names: known questions only, each once, anything else dropped."""
    if not isinstance(value, str) or len(value) > 40 * len(steps.QUESTIONS):
        return {}
    out: dict[str, bool] = {}
    for part in value.split("."):
        m = ENTRY.fullmatch(part)
        if m and m.group(1) in steps.QUESTIONS:
            out.setdefault(m.group(1), m.group(2) == "1")
    return out


def restore() -> None:
    """Once per session, before the page: the first answers this browser kept, unless in a class."""
    ss = st.session_state
    if ss.get("_progress_checked"):
        return
    ss["_progress_checked"] = True
    if seat_token():
        return
    kept = decode(st.context.cookies.get(PROGRESS))
    if kept and not ss.get("lesson_first"):
        ss["lesson_first"] = kept
        ss["_progress_written"] = encode(kept)


def save() -> None:
    """After the page: the first answers into the cookie when they changed (a reset clears it)."""
    ss = st.session_state
    if seat_token():
        return
    now = encode(ss.get("lesson_first", {}))
    if now != ss.get("_progress_written", ""):
        ss["_progress_written"] = now
        set_cookie(PROGRESS, now, None if now else 0)
