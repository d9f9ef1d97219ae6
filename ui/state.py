"""Session and URL state: the one input object of a rerun (Inputs), the query string, notices.

The sentence, model, layer, head and lesson step are settings (ui/settings.py): kept in the
session across page switches, and written to and read from the URL here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import streamlit as st

from mha.models import catalog

from .settings import SETTINGS, from_url, page_settings, to_url

MAX_CHARS = catalog.MAX_CHARS
URL_KEYS = ("model", "text", "text_b", "layer", "head", "step")


@dataclass(frozen=True)
class Inputs:
    """What every page reads, fixed for one rerun: the model's name, the cleaned sentence, the
    cleaned second sentence (None if there is none) and how many characters were cut off."""

    model: str
    text: str
    text_b: str | None = None
    cut: int = 0
    # the inputs of the page this one is compared on (with_text): its results are kept with theirs
    # (ui/cache.py's RESULTS groups them), so computing one never pushes out the other; not part of the key
    beside: Inputs | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_raw(cls, model: str, text: str, text_b: str = "", cut: int = 0) -> Inputs:
        """Clean the typed text (control characters out, cut to MAX_CHARS); `cut` counts
        characters already cut off before (a long paste)."""
        text, cut_a = catalog.clean_text(text or "")
        text_b, cut_b = catalog.clean_text(text_b or "")
        return cls(model, text, text_b.strip() or None, cut + cut_a + cut_b)

    def with_text(self, text: str) -> Inputs:
        """The same model with another sentence (no second sentence), to compare with this one."""
        return replace(Inputs.from_raw(self.model, text), beside=self)

    @property
    def group(self) -> Inputs:
        """The inputs whose results these are kept with: the page's own (see `beside`)."""
        return self.beside.group if self.beside is not None else self

    def with_model(self, model: str) -> Inputs:
        return replace(self, model=model)

    @property
    def size(self) -> int:
        """Characters in both sentences (what the caches are tiered by)."""
        return len(self.text) + len(self.text_b or "")


def inputs() -> Inputs:
    """This rerun's inputs, as the sidebar produced them (app.py runs it before every page)."""
    return st.session_state["_inputs"]


def literal(text: str, limit: int = 40) -> str:
    """User text shown inside Markdown, as literal characters on one line (no markup, headings,
    LaTeX or links): line breaks become spaces, Markdown's punctuation is escaped."""
    text = " ".join(text.split())  # no line break: no heading underline ("===", "---") can follow
    text = text[:limit] + ("..." if len(text) > limit else "")
    return "".join("\\" + c if c in "\\`*_{}[]()#+-.!|<>$~:=" else c for c in text)


def cut_paste(key: str) -> Callable[[str], str]:
    """A `clean` for kept text widgets: a paste longer than MAX_CHARS keeps its first MAX_CHARS
    characters (the browser box has no limit: a limit there silently drops the whole paste);
    pasted_cut(key) says how many were cut while the text is unchanged."""

    def clean(value: str) -> str:
        st.session_state[f"_cut_{key}"] = (value[:MAX_CHARS], max(0, len(value) - MAX_CHARS))
        return value[:MAX_CHARS]

    return clean


def pasted_cut(key: str) -> int:
    """Characters cut off the last paste into text widget `key`, if the text is still that paste."""
    text, cut = st.session_state.get(f"_cut_{key}", ("", 0))
    return cut if st.session_state.get(key) == text else 0


def notice(message: str) -> None:
    """Queue a one-off message shown at the top of the page (bad URL values, fallbacks)."""
    st.session_state.setdefault("_notices", []).append(message)


def show_notices() -> None:
    for message in st.session_state.pop("_notices", []):
        st.warning(message, icon=":material/warning:")


def init_state() -> None:
    """Defaults once per session, then the values a link carries in its query string: a shared
    link opening the app, or a link inside it (st.page_link with query_params, the browser's
    back button). Parameters equal to one sync_url wrote lately are the app's own: ignored, even
    when not the latest (a rerun asked for before the browser showed the newest address, e.g. a
    page switch right after typing on a slow connection, carries the one before it: read as a
    link, it would put the old sentence back)."""
    ss = st.session_state
    if not ss.get("_initialised"):
        ss["_initialised"] = True
        ss.update({key: SETTINGS[key].default for key in ("text", "text_b", "layer", "head", "step")})
        ss["model"] = catalog.default_model_name()
    params = {k: st.query_params.get(k) for k in st.query_params if k in SETTINGS}
    if not params or params in ss.get("_url_written", []):
        return
    written(params)
    for name in params.keys() - {"text", "text_b", "model"}:  # read by declared type (ui/settings.py)
        try:
            ss[name] = from_url(name, params[name])
        except ValueError as e:
            notice(f"The link's {name}={literal(params[name], 20)} cannot be used ({e}): using the default.")
            continue
        if name not in URL_KEYS:  # layer, head and step are checked where they are used
            ss.setdefault("_from_link", set()).add(name)  # setting_widget() says so if the page cannot show it
    for name in ("text", "text_b"):
        if name in params:
            ss[name], cut = catalog.clean_text(params[name])
            if cut:
                notice(f"The link's text was cut to its first {MAX_CHARS:,} characters ({cut:,} characters dropped).")
    if "model" in params:
        names = [s.name for s in catalog.available_models()]
        if params["model"] in names:
            ss["model"] = params["model"]
        else:
            notice(
                f"The link asks for a model that is not on the list ({literal(params['model'])}): "
                f"using {catalog.DEFAULT_MODEL}. Available: {', '.join(names)}."
            )


URLS_KEPT = 4  # the app's own query strings remembered: a lagging address is a rerun or two old


def written(params: dict[str, str]) -> None:
    """Remember `params` as a query string of this session's own (the last URLS_KEPT of them)."""
    ss = st.session_state
    kept = [p for p in ss.get("_url_written", []) if p != params]
    ss["_url_written"] = [*kept, params][-URLS_KEPT:]


def sync_url(inp: Inputs, page: str = "") -> None:
    """Write the current view into the query string so the link reopens it: sentence, model,
    layer, head, and the page's own settings that are not their defaults (the lesson's step)."""
    ss = st.session_state
    want = {"model": inp.model, "text": inp.text, "layer": str(ss["layer"]), "head": str(ss["head"])}
    if inp.text_b:
        want["text_b"] = inp.text_b
    if page == "lesson":
        want["step"] = str(ss["step"])
    if "_class_rev" in ss:  # a class's student: the pin this page follows (ui.classroom.arrive reads it back)
        want["pin"] = str(ss["_class_rev"])
    if page == "classroom":  # the class page's own: a code to join with; the teacher's view shows only its own
        own = {k: st.query_params[k] for k in ("join", "teacher", "teach") if k in st.query_params}
        want = own if {"teacher", "teach"} & set(own) else want | own
    for key in page_settings(page):  # the page's settings that are not their default
        if key in ss and (ss[key] != SETTINGS[key].default or SETTINGS[key].default is None):
            want[key] = to_url(ss[key])
    current = {k: st.query_params.get(k) for k in st.query_params}
    if current != want:
        st.query_params.from_dict(want)
    written({k: v for k, v in want.items() if k in SETTINGS})  # as init_state reads a link: settings only
