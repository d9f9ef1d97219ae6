"""Every key the app keeps in a session, declared once with its type, and `setting_widget`, the one way a
page's widget keeps its value.

A setting's value lives in st.session_state[key], which survives page switches (a widget's own
state is dropped when its page is not shown); the widget itself has key "_w_<key>" and follows
the stored value. Keys under STATE are the app's own bookkeeping, never shown as widgets.
Quiz answers are settings too (prefix "q_", one per question, an int or None).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import streamlit as st

from mha.analyses import collapse
from mha.lesson.examples import DEFAULT_TEXT
from mha.lesson.steps import KEYS as STEP_KEYS

_UNSET: Any = object()


@dataclass(frozen=True)
class Setting:
    """A kept value: its type(s), the value a session starts with (None: the page computes one)."""

    type: type | tuple[type, ...]
    default: Any = None


def _path(prefix: str, alpha: float) -> dict[str, Setting]:
    """The collapse-path controls of one page (ui.path_controls)."""
    return {
        f"{prefix}_shared": Setting(bool, False),
        f"{prefix}_alpha": Setting(float, alpha),
        f"{prefix}_source": Setting((str, int), collapse.DEFAULT_SOURCE),
        f"{prefix}_roles": Setting(list, ["q", "k", "v"]),
    }


def _before(prefix: str) -> dict[str, type | tuple[type, ...]]:
    """The alpha kept while a page's Shared toggle is on (ui.path_controls puts it back after)."""
    return {f"_{prefix}_alpha_before": (float, type(None))}


SETTINGS: dict[str, Setting] = {
    # the sidebar and the URL (every page)
    "text": Setting(str, DEFAULT_TEXT),
    "text_b": Setting(str, ""),
    "model": Setting(str),  # bert.default_model_name(), set by state.init_state
    "layer": Setting(int, 0),
    "head": Setting(int, 0),
    "step": Setting(str, STEP_KEYS[0]),  # the lesson's step, by its key (mha.lesson.steps.KEYS)
    # BERT's heads
    "heads_hide": Setting(bool, False),
    "heads_merge": Setting(bool, False),
    "heads_block": Setting((str, type(None)), None),
    "heads_overlay": Setting(list),  # default: the current head
    "focus_token": Setting(int, 2),
    # Build it yourself
    "build_source": Setting(str, "BERT layer"),
    "build_heads": Setting(int),  # default: the model's own head count
    "build_shared": Setting(bool, False),
    "build_scale": Setting(bool, True),
    "build_shuffle": Setting(bool, False),
    "build_seed": Setting(int, 0),
    "build_window": Setting(int, 0),  # a sliding window of that many keys (causal layers); 0: the layer's own
    "build_follow": Setting(int, 0),
    # Collapse and subspaces: the path to shared projections
    **_path("collapse", 0.5),
    "collapse_scope": Setting(str, "this layer"),
    **_path("subspaces", 0.0),
    "subspaces_token": Setting(int),  # default: "mole" if the sentence has it
    "subspaces_play": Setting(bool, False),  # the animation along alpha (heavy for a browser: on request)
    "subspaces_many": Setting(bool, False),  # the pool of sentences
    # Head atlas
    "atlas_measure": Setting(str, "to previous"),
    "link_q": Setting(int),  # defaults: "making" -> "difficult" if the sentence has them
    "link_k": Setting(int),
    "link_both": Setting(bool, False),
    "compare_text": Setting(str, "The mole dug a tunnel under the garden."),
    "compare_measure": Setting(str, "entropy / ln T"),
    "views_tok": Setting(int),
    # Do we need every head?
    "needed_remove": Setting(list, []),
    "needed_least": Setting(int, 0),
    # What to share (the ladder)
    "sharing_rung": Setting(str),  # a rung's name; default: the second below MHA (GQA-4 for 12 heads)
    "sharing_pooling": Setting(str, "mean-pooled"),  # the rung to uptrain starts plain or with its scale restored
    "sharing_steps": Setting(int, 1000),
    "sharing_seed": Setting(int, 0),
    # Why many heads
    "why_relations": Setting(int, 4),
    "why_heads": Setting(int, 4),
    "why_steps": Setting(int, 1000),
    "why_seed": Setting(int, 0),
    # The lesson
    "lesson_query": Setting(int),  # default: lesson.query_rule on the sentence
    "lesson_head_a": Setting(int, 0),
    "lesson_head_b": Setting(int, 1),
    "lesson_mixed": Setting(bool, False),
    "lesson_share": Setting(bool, False),
    "lesson_roles": Setting(list, ["k", "v"]),
    "lesson_shuffle": Setting(bool, False),
}
PAGE_SETTINGS = {  # a page's settings, by key prefix: what a link to the page carries
    "bert_heads": ("heads_", "focus_token"),
    "build": ("build_",),
    "collapse": ("collapse_",),
    "subspaces": ("subspaces_",),
    "atlas": ("atlas_", "link_", "compare_", "views_tok"),
    "heads_needed": ("needed_",),
    "sharing": ("sharing_",),
    "why_heads": ("why_",),
    "lesson": ("lesson_",),  # (and the step: ui.state.sync_url)
}
QUIZ = Setting((int, type(None)), None)  # every "q_<question>" key: the option picked or the number typed

STATE: dict[str, type | tuple[type, ...]] = {  # the app's own bookkeeping
    "_initialised": bool,  # defaults and the link's values are in
    "_inputs": object,  # this rerun's ui.Inputs
    "_notices": list,  # messages for the top of the page
    "_url_written": list,  # the query strings sync_url wrote last (dicts, newest last)
    "_why_training": tuple,  # (settings, step) of a training that did not finish
    "lesson_first": dict,  # question -> right at the first try
    "_progress_checked": bool,  # the lesson's score cookie was read (once per session: ui.progress)
    "_progress_written": str,  # the score as the cookie has it
    "_from_link": set,  # settings a link set that no widget has shown yet
    "_scrolled": set,  # what ui.scroll_here scrolled to once (a step opened, a question answered)
    "_scroll_current": str,  # the answer whose scroll is sent until the reader moves on
    "lesson_moves": int,  # Back and Next pressed: each move opens the step at the top
    "_page": str,  # the page of the last rerun: another one opens at its top (ui.scroll_top)
    "_page_visits": int,  # pages opened in this session: each visit opens at its top
    # class mode (ui.classroom, ui.teacher)
    "_class_checked": bool,  # the seat cookie was looked up (once per session)
    "_seat": str,  # the student's seat token (the browser keeps it too, in a cookie)
    "_class_rev": int,  # the teacher's pin this session follows
    "_class_name": tuple,  # (class code, nickname)
    "_class_go": object,  # a pin to apply at the next run (classroom.Pin)
    "_class_sent": dict,  # question -> the answer the server has as shown now (its first it keeps itself)
    "_teacher": str,  # the teacher's token (the teacher's browser keeps it too, in a cookie)
    "_class_left": bool,  # the seat cookie is to be deleted
    "_teacher_said": tuple,  # (kind, message) for the teacher view's next run
    "_teacher_ended": bool,  # this session's teacher ended its class
}
STATE_PREFIXES: dict[str, type | tuple[type, ...]] = {
    "_cut_": tuple,  # "_cut_<text box>": (the cut paste, characters cut)
    "_follows_": object,  # "_follows_<setting>": what the setting was set for (setting_widget's `follows`)
    **_before("collapse"),
    **_before("subspaces"),
}

ELEMENT_PREFIXES = (
    "_ex_",
    "class_",
    "teacher_",
    "FormSubmitter:",
)  # example buttons "_ex_<n>"; the class page's widgets and forms
ELEMENTS = (  # keys of elements that keep no setting: buttons, charts
    "lesson_back",
    "lesson_next",
    "lesson_reset",
    "needed_measure",
    "sharing_train",
    "why_train",
    "subspaces_panels",
    "subspaces_animation",
    "subspaces_pool",
    "_class_back",
)


def declared(key: str) -> Setting:
    """The declaration of setting `key` (a quiz answer if it starts with "q_"); KeyError if undeclared."""
    if key.startswith("q_"):
        return QUIZ
    if key not in SETTINGS:
        raise KeyError(f"session key {key!r} is not declared in ui/settings.py")
    return SETTINGS[key]


def page_settings(page: str) -> list[str]:
    """The settings of page `page` (its url path, e.g. "collapse"), in declaration order."""
    return [key for key in SETTINGS if key.startswith(PAGE_SETTINGS.get(page, ()))]


def to_url(value: Any) -> str:
    """A setting's value as a query-string value: booleans 1/0, lists comma-separated (a pair
    as "layer.head"), None as an empty string."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, list):
        return ",".join(".".join(map(str, v)) if isinstance(v, tuple) else str(v) for v in value)
    return "" if value is None else str(value)


def _item(text: str) -> Any:
    if re.fullmatch(r"-?\d{1,4000}", text):
        return int(text)
    if re.fullmatch(r"\d+\.\d+", text):
        return tuple(int(x) for x in text.split("."))
    return text


def from_url(key: str, raw: str) -> Any:
    """The value of setting `key` written as `raw` by to_url; ValueError if it is not one."""
    kinds = declared(key).type
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if raw == "" and type(None) in kinds:
        return None
    if bool in kinds:
        if raw not in ("0", "1"):
            raise ValueError("not 0 or 1")
        return raw == "1"
    if list in kinds:
        return [_item(x) for x in raw.split(",") if x]
    if int in kinds and re.fullmatch(r"-?\d{1,4000}", raw):  # (Python reads at most 4,300 digits)
        return int(raw)
    if float in kinds:
        value = float(raw)
        if not math.isfinite(value):
            raise ValueError("not a finite number")
        return value
    if str in kinds:
        return raw
    raise ValueError("not a whole number")


def quiz_keys() -> list[str]:
    """Every quiz answer this session keeps, as settings and as widgets ("q_...", "_w_q_...")."""
    return [k for k in st.session_state if str(k).startswith(("q_", widget_key("q_")))]


def widget_key(key: str) -> str:
    """The key of the widget that shows setting `key`."""
    return f"_w_{key}"


def setting_widget(
    kind: str,
    label: str,
    key: str,
    container: Any = None,
    clean: Callable[[Any], Any] | None = None,
    default: Any = _UNSET,
    on_change: Callable[[], None] | None = None,
    follows: Any = None,
    **kwargs: Any,
) -> Any:
    """Widget `kind` (e.g. "selectbox") showing setting `key`, which survives page switches.

    The value starts at the declared default (or `default`, for one the page computes), is kept
    valid for this widget (_fit), and is written back on change through `clean` if given, then
    `on_change`. A setting that belongs to something else (a token picker to its sentence's
    tokens) names it in `follows`: when that changes, the setting starts again at its default.

    The session keeps a widget's functions (format_func, clean, callbacks, a download's data) until
    the widget is drawn again: in a page, pass a bound method (`"head {}".format`, `labels.__getitem__`) or a
    ui function, never a lambda or a def of the page, which holds the page's namespace (its
    sentence's run and every array it made) as long as the session lives.
    """
    setting = declared(key)
    start = setting.default if default is _UNSET else default
    box = container or st
    _begin(key, start, follows)
    asked = st.session_state[key]
    linked = key in st.session_state.get("_from_link", set())
    value = _fit(key, kind, start, isinstance(None, setting.type), kwargs)
    if linked:
        st.session_state["_from_link"].discard(key)
        if value != asked:
            box.warning(f"The link's {key}={to_url(asked)!r} is not available here: showing {to_url(value)!r}.")
    return _draw(box, kind, label, key, value, _writer(key, clean, on_change), kwargs)


def _begin(key: str, start: Any, follows: Any) -> None:
    """Give setting `key` its start value the first time, and again when what it follows changed
    (the first time, a value from a link stays)."""
    ss = st.session_state
    if follows is not None and ss.get(f"_follows_{key}") != follows:
        if f"_follows_{key}" in ss:
            ss.pop(key, None)
        ss[f"_follows_{key}"] = follows
    if key not in ss:
        ss[key] = list(start) if isinstance(start, list) else start


def _fit(key: str, kind: str, start: Any, none_ok: bool, kwargs: dict[str, Any]) -> Any:
    """The stored value made valid for this widget, stored back: a value no longer among
    `options` (another model, another sentence) falls back to the start, else the first option
    (None stays where the setting allows it: an unanswered question); a multiselect keeps its
    values still among the options; a number outside [min_value, max_value] goes back to the
    start, else min_value (e.g. another model, with fewer heads)."""
    ss = st.session_state
    if "options" in kwargs:
        options = kwargs["options"] = list(kwargs["options"])
        if kind == "multiselect":
            ss[key] = [v for v in ss[key] if v in options]
        elif ss[key] not in options and not (ss[key] is None and none_ok):
            ss[key] = start if start in options or (start is None and none_ok) else options[0]
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    if ss[key] is not None and (low is not None and ss[key] < low or high is not None and ss[key] > high):
        fits = start is not None and (low is None or low <= start) and (high is None or start <= high)
        ss[key] = start if fits else low
    return ss[key]


def _writer(key: str, clean: Callable[[Any], Any] | None, on_change: Callable[[], None] | None) -> Callable[[], None]:
    """The widget's on_change: its value, through `clean`, into setting `key`, then `on_change`."""

    def write() -> None:
        ss = st.session_state
        if widget_key(key) in ss:  # a change that arrives after a page switch finds the widget gone
            ss[key] = clean(ss[widget_key(key)]) if clean else ss[widget_key(key)]
        if on_change is not None:
            on_change()

    return write


def _draw(box: Any, kind: str, label: str, key: str, value: Any, write: Callable[[], None], kwargs: dict) -> Any:
    """Draw the widget showing `value` and return what it shows. The widget follows the stored
    value when it was changed elsewhere (a link, an example button). A toggle's `help` is a
    caption under it, not a (?) in its label: on a phone, tapping the (?) switched the toggle."""
    ss, wkey = st.session_state, widget_key(key)
    if kind in ("selectbox", "radio"):
        kwargs["index"] = None if value is None else kwargs["options"].index(value)
    elif kind in ("multiselect", "segmented_control", "pills"):
        kwargs["default"] = value
    else:
        kwargs["value"] = value
    known = wkey in ss
    if known and ss[wkey] != value:
        ss[wkey] = value
    note = kwargs.pop("help", None) if kind == "toggle" else None
    shown = getattr(box, kind)(label, key=wkey, on_change=write, **kwargs)
    if note:
        box.caption(note)
    if not known and shown != value:
        # The browser holds a value this session never had: its page reconnected to a new session
        # (another replica after a crash, a restarted server) and the rerun carries what the
        # learner typed since, with the address of before. What is on screen wins.
        write()
    return shown
