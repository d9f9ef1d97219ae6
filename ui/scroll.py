"""Scrolling the page from the server, the one place that runs JavaScript in the page (public
API: st.html with unsafe_allow_javascript): to the top when a page or a lesson step opens
(Streamlit keeps the scroll position, so a step or a page opened mid-page), and to an answer's
feedback when it first shows, so that the picture it unlocks is on the screen.

Only the nearest scrolled container of the element is moved (its scrollTop): scrollIntoView also
moved other containers, and a picker opened right after would not open."""

from __future__ import annotations

import json
import zlib

import streamlit as st

# box(el): the nearest ancestor of el that scrolls (overflow auto or scroll), else the page
_BOX = (
    "const scrolls = (e) => e.scrollHeight > e.clientHeight && /(auto|scroll)/.test(getComputedStyle(e).overflowY); "
    "const box = (el) => { let b = el.parentElement; while (b && !scrolls(b)) b = b.parentElement; "
    "return b || document.scrollingElement; }; "
)


def _once(key: str) -> bool:
    """True the first time `key` is seen in this session."""
    done = st.session_state.setdefault("_scrolled", set())
    if key in done:
        return False
    done.add(key)
    return True


def scroll_here(key: str) -> None:
    """Scroll the page so that this point is near the top of the screen, once per `key` in this
    session (a question first answered): later reruns leave the reader where they are. Again every
    0.25 s for 8 s as the elements below it are drawn (a chart arrives later, on a fresh browser
    after Plotly's code, and the page must be long enough), until the reader acts (a click, a key,
    a wheel or a touch) or the page is scrolled by anything else (not counting the browser pulling
    it back when the page briefly gets shorter, as a rerun removes its old elements)."""
    ss = st.session_state
    if _once(key):
        ss["_scroll_current"] = key
    if ss.get("_scroll_current") != key:
        return
    # Sent again, unchanged, on every rerun until the reader moves on (ui.scroll_here_done): the
    # browser keeps the element and does not run its script twice, and a rerun right after the
    # answer (a text box committing on blur) does not remove it before the page has scrolled.
    anchor = f"mha-scroll-{zlib.crc32(key.encode()):08x}"
    js = (
        f"{{ {_BOX} const el = document.getElementById({json.dumps(anchor)}); "
        "let last = null; "  # where go() left the page: moved since, by anyone else, it stops
        "const go = () => { if (!el || !el.isConnected) return; const b = box(el); "
        "const clamped = b.scrollTop >= b.scrollHeight - b.clientHeight - 2; "  # the page shrank under it
        "if (last !== null && Math.abs(b.scrollTop - last) > 2 && !clamped) return stop(); "
        "const base = b === document.scrollingElement ? 0 : b.getBoundingClientRect().top; "
        "b.scrollTop = Math.max(0, b.scrollTop + el.getBoundingClientRect().top - base - 64); last = b.scrollTop; }; "
        "const acts = ['wheel', 'touchstart', 'keydown', 'mousedown']; let every = null; "
        "const stop = () => { clearInterval(every); acts.forEach((a) => removeEventListener(a, stop, true)); }; "
        "acts.forEach((a) => addEventListener(a, stop, true)); "
        "go(); every = setInterval(go, 250); setTimeout(stop, 8000); }"
    )
    st.html(f'<div id="{anchor}"></div><script>{js}</script>', unsafe_allow_javascript=True)


def scroll_here_done() -> None:
    """The reader moved on (another step, another page): no answer's scroll is sent again."""
    st.session_state.pop("_scroll_current", None)


def scroll_top(key: str) -> None:
    """Scroll the page to its top, once per `key` in this session (another page, another step).
    Takes no room: ui/style.css hides the element (.mha-scroll-top)."""
    if not _once(key):
        return
    js = f"{{ {_BOX} const me = document.currentScript; if (me) box(me).scrollTop = 0; }}"
    st.html(f'<div class="mha-scroll-top"></div><script>{js}</script>', unsafe_allow_javascript=True)
