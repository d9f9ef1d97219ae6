"""The only module that imports Streamlit: cached loaders, the shared sidebar, URL state.

The model is loaded once per process (st.cache_resource) and shared read-only by every
session; per-sentence results are cached by value (st.cache_data, bounded).

Widget values that must survive page switches (sentence, model, layer, head) live in plain
session_state keys; each widget gets its value from there and writes back in `on_change`
(keyed widgets in the entrypoint's sidebar otherwise snap back under st.navigation).
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import pandas  # noqa: F401  imported once here: first imports racing in session threads fail
import plotly.io
import streamlit as st
import torch

from mha import atlas, bert, collapse

torch.set_num_threads(int(os.environ.get("MHA_TORCH_THREADS", "1")))  # see app.py
plotly.io.to_json({"data": [], "layout": {}})  # load Plotly's serialiser before any session does

DEFAULT_TEXT = "The mole on his arm was not a mole but a rare insect."
MAX_CHARS = bert.MAX_CHARS
EXAMPLES = {
    "Two moles": DEFAULT_TEXT,
    "Making ... more difficult": (
        "It is in this spirit that a majority of American governments have passed new laws "
        "since 2009 making the registration or voting process more difficult."
    ),
    "Coreference": "The trophy did not fit in the suitcase because it was too big.",
    "Long paragraph": (
        "Attention lets every token look at every other token and take a weighted average of "
        "what it finds. A single head has one set of weights per token, so it must blend every "
        "kind of relation into one average: the verb that agrees with its subject, the pronoun "
        "that points back to a name, the adjective that colours a noun, the word just before. "
        "Multi-head attention runs several of these averages side by side. Each head projects "
        "the tokens into its own smaller space with its own learned matrices, attends there, "
        "and hands back a short vector; the vectors are joined end to end and mixed by one more "
        "matrix. Because the projections differ, the heads can specialise: one may follow "
        "syntax, another may track meaning, another may simply look at the next word. If all "
        "heads shared one projection they would compute the same thing, and the extra heads "
        "would add cost without adding a single new point of view. Researchers who studied "
        "BERT found heads that attend to the separator token, heads that attend to the previous "
        "or next word, and heads that link determiners to their nouns or objects to their verbs."
    ),
}


# ---------------------------------------------------------------- cached engine calls


@st.cache_resource(show_spinner=False, max_entries=2)
def load_model(name: str) -> bert.LoadedBert:
    """The shared, read-only model (one per process and name)."""
    import sys
    import time

    t0 = time.perf_counter()
    model = bert.load_bert(name)
    print(f"mha: loaded {name} in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return model


TIERS = ((300, 64), (1500, 4), (None, 2))  # (up to this many characters, cache entries)


def _tiered(fn):
    """Cache fn by value in three bounded caches by input length, so that a few long inputs
    (about 75 MB of attention each at 512 tokens) cannot push out, or pile up beside, many
    short ones. fn's first three arguments are (model_name, text, text_b)."""
    caches = []
    for n, (_, entries) in enumerate(TIERS):
        def tier(*args, _fn=fn):
            return _fn(*args)

        tier.__qualname__ = tier.__name__ = f"{fn.__name__}_tier{n}"
        caches.append(st.cache_data(show_spinner=False, max_entries=entries)(tier))

    def call(model_name: str, text: str, text_b: str | None, *rest):
        size = len(text) + len(text_b or "")
        n = next(i for i, (limit, _) in enumerate(TIERS) if limit is None or size <= limit)
        return caches[n](model_name, text, text_b, *rest)

    call.__doc__, call.__name__ = fn.__doc__, fn.__name__
    call.clear = lambda: [c.clear() for c in caches]
    return call


@_tiered
def cached_run(model_name: str, text: str, text_b: str | None = None) -> bert.BertRun:
    """BERT's attentions and hidden states for one sentence (or pair), cached by value."""
    return load_model(model_name).attend(text, text_b)


@_tiered
def cached_collapse(model_name: str, text: str, text_b: str | None, layer: int, alpha: float,
                    source: int | str, roles: tuple[str, ...]) -> collapse.LayerCollapse:
    """One layer on the path to shared projections, with its measures (copies of the weights)."""
    return collapse.collapse_layer(load_model(model_name), cached_run(model_name, text, text_b),
                                   layer, alpha, source, roles)


@st.cache_data(show_spinner=False, max_entries=32)
def cached_sweep(model_name: str, text: str, text_b: str | None, layer: int, source: int | str,
                 roles: tuple[str, ...]) -> list[dict[str, float]]:
    """The measures at alpha = 0, 0.1, ..., 1 for one layer."""
    return collapse.alpha_sweep(load_model(model_name), cached_run(model_name, text, text_b),
                                layer, source, roles)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_whole_model(model_name: str, text: str, text_b: str | None, layers: tuple[int, ...],
                       alpha: float, source: int | str, roles: tuple[str, ...]) -> dict[str, float]:
    """How much the final hidden states move when `layers` share projections."""
    return collapse.whole_model_effect(load_model(model_name), cached_run(model_name, text, text_b),
                                       layers, alpha, source, roles)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_measures(model_name: str, text: str, text_b: str | None = None) -> dict:
    """Every per-head measure of the run, (L, H) each, with pattern labels."""
    return atlas.measures(cached_run(model_name, text, text_b))


@st.cache_data(show_spinner=False, max_entries=64)
def cached_token_views(model_name: str, text: str, text_b: str | None, token: int) -> dict:
    """Raw attention, rollout and value-weighted attention of one token across layers."""
    return atlas.token_views(load_model(model_name), cached_run(model_name, text, text_b), token)


class ExperimentStore:
    """Finished experiments shared by every session (bounded, oldest dropped first)."""

    def __init__(self, size: int = 16) -> None:
        import threading
        from collections import OrderedDict

        self.size, self.items, self.lock = size, OrderedDict(), threading.Lock()

    def get(self, key):
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
            return self.items.get(key)

    def put(self, key, value) -> None:
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.size:
                self.items.popitem(last=False)


@st.cache_resource(show_spinner=False)
def experiments() -> ExperimentStore:
    """Results of the training experiment, cached per settings for every session."""
    return ExperimentStore()


def run_key() -> tuple[str, str, str | None]:
    """(model, text, text_b) of the current run, the arguments of every cached call."""
    ss = st.session_state
    text_b = bert.clean_text(ss.get("text_b") or "")[0].strip()
    return ss["model"], bert.clean_text(ss["text"])[0], text_b or None


# ---------------------------------------------------------------- session state + URL


def literal(text: str, limit: int = 40) -> str:
    """User text shown inside Markdown, as literal characters (no markup, no LaTeX, no links)."""
    text = text[:limit] + ("..." if len(text) > limit else "")
    return "".join("\\" + c if c in "\\`*_{}[]()#+-.!|<>$~:" else c for c in text)


def notice(message: str) -> None:
    """Queue a one-off message shown at the top of the page (bad URL values, fallbacks)."""
    st.session_state.setdefault("_notices", []).append(message)


def show_notices() -> None:
    for message in st.session_state.pop("_notices", []):
        st.warning(message, icon=":material/warning:")


def _int_param(params, name: str) -> int | None:
    raw = params.get(name)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        notice(f"The link's {name}={literal(raw, 20)} is not a whole number: using the default.")
        return None


def init_state() -> None:
    """Defaults, then (once per session) the values a shared link carries in its query string."""
    ss = st.session_state
    if ss.get("_initialised"):
        return
    ss["_initialised"] = True
    ss.update(text=DEFAULT_TEXT, text_b="", model=bert.default_model_name(), layer=0, head=0)
    params = st.query_params
    for name in ("text", "text_b"):
        if name in params:
            ss[name], cut = bert.clean_text(params[name])
            if cut:
                notice(f"The link's text was cut to its first {MAX_CHARS:,} characters.")
    if "model" in params:
        names = [s.name for s in bert.available_models()]
        if params["model"] in names:
            ss["model"] = params["model"]
        else:
            notice(f"The link asks for a model that is not on the list ({literal(params['model'])}): "
                   f"using {bert.DEFAULT_MODEL}. Available: {', '.join(names)}.")
    for name in ("layer", "head"):
        value = _int_param(params, name)
        if value is not None:
            ss[name] = value  # checked against the model by layer_head()


def sync_url() -> None:
    """Write the current view into the query string so the link reopens it."""
    ss = st.session_state
    want = {"model": ss["model"], "text": ss["text"], "layer": str(ss["layer"]), "head": str(ss["head"])}
    if ss.get("text_b"):
        want["text_b"] = ss["text_b"]
    current = {k: st.query_params.get(k) for k in ("model", "text", "text_b", "layer", "head")}
    if {k: v for k, v in current.items() if v is not None} != want:
        st.query_params.from_dict(want)


def kept(kind: str, label: str, key: str, container: Any = None, **kwargs: Any) -> Any:
    """Widget `kind` (e.g. "selectbox") whose value lives in st.session_state[key].

    The widget's own state (key "_w_<key>") follows st.session_state[key] when that was changed
    elsewhere (a link, an example button, a fallback), and writes back through on_change.
    """
    ss = st.session_state
    wkey = f"_w_{key}"

    def _store() -> None:
        if wkey in ss:  # a change that arrives after a page switch finds the widget gone
            ss[key] = ss[wkey]

    if "options" in kwargs:
        options = list(kwargs["options"])
        if ss.get(key) not in options:
            ss[key] = options[0]
        kwargs["index"] = options.index(ss[key])
    else:
        kwargs["value"] = ss[key]
    if wkey in ss and ss[wkey] != ss[key]:
        ss[wkey] = ss[key]
    return getattr(container or st, kind)(label, key=wkey, on_change=_store, **kwargs)


def record_timing(page: str, seconds: float) -> None:
    """Append one script run's duration to $MHA_TIMING_LOG (used by bench/bench_load.py)."""
    path = os.environ.get("MHA_TIMING_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{page}\t{seconds:.4f}\n")


# ---------------------------------------------------------------- sidebar


def _use_example(text: str) -> None:
    st.session_state["text"] = text
    st.session_state["_w_text"] = text
    st.session_state["text_b"] = ""
    st.session_state["_w_text_b"] = ""


def sidebar() -> None:
    """Sentence, optional second sentence, examples and model picker (on every page)."""
    init_state()
    sb = st.sidebar
    kept("text_area", "Sentence", "text", container=sb, height=110, max_chars=MAX_CHARS,
         help="Any text; beyond the model's 512 tokens it is truncated, with a notice.")
    kept("text_input", "Second sentence (optional: BERT's segment B)", "text_b", container=sb,
         max_chars=MAX_CHARS)
    sb.caption("Examples")
    cols = sb.columns(2)
    for n, (name, text) in enumerate(EXAMPLES.items()):
        cols[n % 2].button(name, key=f"_ex_{n}", on_click=_use_example, args=(text,),
                           width="stretch")
    specs = {s.name: s for s in bert.available_models()}
    kept("selectbox", "Model", "model", container=sb, options=list(specs),
         format_func=lambda n: f"{n} ({'bundled' if specs[n].source == 'bundled' else specs[n].source})",
         help="\n\n".join(f"**{s.name}**: {s.description}" for s in specs.values()))
    sb.caption(specs[st.session_state["model"]].description)


# ---------------------------------------------------------------- the current model and run


def get_model() -> bert.LoadedBert:
    """The chosen model; a model that cannot be loaded here falls back to the bundled one."""
    name = st.session_state.get("model", bert.DEFAULT_MODEL)
    try:
        if name == bert.DEFAULT_MODEL:
            with st.spinner(f"Loading {name} (first time only, a few seconds)..."):
                return load_model(name)
        with st.status(f"Loading {name}...", expanded=False) as status:
            model = load_model(name)
            status.update(label=f"{name} loaded", state="complete")
            return model
    except (bert.ModelUnavailableError, ValueError, OSError) as e:
        st.session_state["model"] = bert.DEFAULT_MODEL  # the picker follows on the next run
        st.error(f"Could not load {name}: {e}. Showing {bert.DEFAULT_MODEL} instead.")
        return load_model(bert.DEFAULT_MODEL)


def current_run() -> bert.BertRun | None:
    """The run for the sidebar sentence(s), or None (with a message in the page)."""
    ss = st.session_state
    text, cut_a = bert.clean_text(ss.get("text", ""))
    text_b, cut_b = bert.clean_text(ss.get("text_b", "") or "")
    if cut_a or cut_b:
        st.warning(f"The text was cut to its first {MAX_CHARS:,} characters.")
    if not text.strip():
        st.info("The sentence is empty: type one in the sidebar, or pick an example.")
        return None
    model = get_model()
    with st.spinner("Running BERT..."):
        run = cached_run(model.name, text, text_b.strip() or None)
    if all(t in ("[CLS]", "[SEP]") for t in run.tokens):
        st.info("Nothing is left to look at: the tokenizer dropped every character of this text "
                "(control characters only?). Type some words.")
        return None
    if run.truncated:
        st.warning(f"The input is longer than {model.name}'s maximum of {run.max_length} tokens: "
                   f"the last {run.n_dropped} tokens were dropped.")
    return run


def layer_head(run: bert.BertRun, container: Any = None, head: bool = True) -> tuple[int, int]:
    """Layer and head pickers (values kept in the session and the URL), clamped to the model."""
    ss = st.session_state
    for key, n in (("layer", run.n_layers), ("head", run.n_heads)):
        if not 0 <= int(ss.get(key, 0)) < n:
            notice(f"{key} {ss.get(key)} does not exist in {run.model_name} (0..{n - 1}): showing {key} 0.")
            ss[key] = 0
    show_notices()
    box = container or st
    cols = box.columns(2) if head else [box]
    layer = kept("selectbox", "Layer", "layer", container=cols[0], options=list(range(run.n_layers)),
                 format_func=lambda i: f"layer {i}")
    h = ss["head"]
    if head:
        h = kept("selectbox", "Head", "head", container=cols[1], options=list(range(run.n_heads)),
                 format_func=lambda i: f"head {i}")
    return layer, h


def token_picker(label: str, tokens: Sequence[str], default: int = 1, key: str | None = None,
                 container: Any = None) -> int:
    """Choose a token by position; labels show "position: token" so repeats stay distinct."""
    box = container or st
    default = min(default, len(tokens) - 1)
    return box.selectbox(label, range(len(tokens)), index=default, key=key,
                         format_func=lambda i: f"{i}: {tokens[i]}")
