"""Scrolling the page from the server, the one place that runs JavaScript in the page (public
API: st.html with unsafe_allow_javascript): to the top when a page or a lesson step opens
(Streamlit keeps the scroll position, so a step or a page opened mid-page), and to an answer's
feedback when it first shows, so that the picture it unlocks is on the screen."""

from __future__ import annotations

import json
import zlib

import streamlit as st


def scroll_here(key: str) -> None:
    """Scroll the page so that this point is at the top of the screen, once per `key` in this
    session (a step opened, a question first answered): later reruns leave the reader where they are."""
    done = st.session_state.setdefault("_scrolled", set())
    if key in done:
        return
    done.add(key)
    anchor = f"mha-scroll-{zlib.crc32(key.encode()):08x}"
    # again as the elements below it are drawn (a chart arrives later): the page must be long enough.
    # A block of its own: every such script shares the page's global scope
    js = (
        f"{{ const go = () => document.getElementById({json.dumps(anchor)})?.scrollIntoView({{block: 'start'}}); "
        "go(); for (const ms of [300, 900, 2000]) setTimeout(go, ms); }"
    )
    st.html(
        f'<div id="{anchor}" style="scroll-margin-top: 4rem"></div><script>{js}</script>',
        unsafe_allow_javascript=True,
    )


def scroll_top(key: str) -> None:
    """Scroll the page to its top, once per `key` in this session (another page, another step).
    Takes no room: ui/style.css hides the element (.mha-scroll-top), and its script scrolls the
    nearest scrolled container it sits in."""
    done = st.session_state.setdefault("_scrolled", set())
    if key in done:
        return
    done.add(key)
    js = (
        "{ const me = document.currentScript; let box = me && me.parentElement; "
        "const scrolls = (e) => e.scrollHeight > e.clientHeight "
        "&& /(auto|scroll)/.test(getComputedStyle(e).overflowY); "
        "while (box && !scrolls(box)) box = box.parentElement; (box || document.scrollingElement).scrollTop = 0; }"
    )
    st.html(f'<div class="mha-scroll-top"></div><script>{js}</script>', unsafe_allow_javascript=True)
