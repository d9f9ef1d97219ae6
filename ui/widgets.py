"""Shared widgets: the sidebar (which produces the rerun's Inputs), the model with its fallback,
the current run with its messages, the layer/head and token pickers, and the controls of the
path to shared projections."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from mha.analyses import collapse
from mha.analyses.collapse import CollapsePath
from mha.lesson.examples import EXAMPLES
from mha.models import catalog, fetch_gemma
from mha.models.family import LoadedModel
from mha.models.run import Run
from mha.tasks import pruning

from . import frontend
from .cache import cached_run, ladder_conversions, ladder_counts, ladder_measured, load_model
from .settings import SETTINGS, setting_widget
from .state import MAX_CHARS, Inputs, cut_paste, literal, notice, pasted_cut, show_notices


def _use_example(text: str) -> None:
    st.session_state.update(text=text, _w_text=text, text_b="", _w_text_b="")


def sidebar() -> Inputs:
    """Sentence, optional second sentence, examples and model picker (on every page).

    Returns this rerun's Inputs (also kept for ui.inputs()); nothing else reads the sentence
    out of the session.
    """
    sb = st.sidebar  # (app.py has read the link: ui.init_state, before a class's pin is applied)
    setting_widget(
        "text_area",
        "Sentence",
        "text",
        container=sb,
        height=110,
        clean=cut_paste("text"),
        help=f"Any text up to {MAX_CHARS:,} characters (a longer paste is cut, with a notice); "
        "beyond the model's 512 tokens it is truncated, with a notice.",
    )
    sb.caption("Applies when you leave the box (on a keyboard, also Ctrl+Enter).")
    setting_widget(
        "text_input",
        "Second sentence (optional)",
        "text_b",
        container=sb,
        clean=cut_paste("text_b"),
        help="BERT reads it as segment B, a second sentence beside the first; a decoder reads it after the first.",
    )
    sb.caption("Examples")
    cols = [sb, sb]  # one button to a row: two to a row cut their names ("Making ... more diff")
    for n, (name, text) in enumerate(EXAMPLES.items()):
        cols[n % 2].button(name, key=f"_ex_{n}", on_click=_use_example, args=(text,), width="stretch")
    specs = {s.name: s for s in catalog.available_models()}
    setting_widget(
        "selectbox",
        "Model",
        "model",
        container=sb,
        options=list(specs),
        format_func=lambda n: f"{n} ({_kind(specs[n])})",
        help="\n\n".join(f"**{s.name}**: {s.description}" for s in specs.values()),
    )
    picked = specs[st.session_state["model"]]
    sb.caption(picked.description)
    if picked.notice:  # a licence's notice where the model is picked, with its terms as shipped
        sb.caption(picked.notice)
        terms = fetch_gemma.terms() if picked.name == catalog.GEMMA_MODEL else None
        if terms is not None:
            sb.download_button(
                "Gemma Terms of Use (.html)", terms, file_name="GEMMA_TERMS.html", mime="text/html", on_click="ignore"
            )
    with sb:  # Plotly's code fetched and compiled while the learner reads, not after a click
        frontend.preload_plotly()
    ss = st.session_state
    cut = pasted_cut("text") + pasted_cut("text_b")
    ss["_inputs"] = Inputs.from_raw(ss["model"], ss["text"], ss.get("text_b") or "", cut=cut)
    return ss["_inputs"]


def _kind(spec: catalog.ModelSpec) -> str:
    """What the picker says of a model: "decoder", "bundled", "hub" or "local"."""
    return spec.source


LOADED: set[str] = set()  # models this process has loaded (ensure_model shows its status only before)


def ensure_model(inp: Inputs) -> Inputs:
    """Load inp's model (with a progress message; the decoder's first use shows its fetch and
    conversion as they go); one that cannot be loaded here falls back to the bundled model with
    a message saying what failed and what to do. Returns the Inputs naming the model that is loaded."""
    try:
        if inp.model == catalog.DEFAULT_MODEL:
            with st.spinner(f"Loading {inp.model} (first time only, a few seconds)..."):
                load_model(inp.model)
        elif inp.model in LOADED:  # loaded in this process: no status box pushing the page down
            load_model(inp.model)
        else:
            holder = st.empty()  # the status goes once the model is in: it said nothing after that
            with holder.status(f"Loading {inp.model}...", expanded=True):
                bar = st.empty()

                def progress(fraction: float, message: str) -> None:
                    bar.progress(min(max(fraction, 0.0), 1.0), text=message)

                load_model(inp.model, progress)
            holder.empty()
            LOADED.add(inp.model)
        return inp
    except (catalog.ModelUnavailableError, ValueError, OSError) as e:
        st.session_state["model"] = catalog.DEFAULT_MODEL  # the picker follows on the next run
        st.error(f"Could not load {inp.model}: {str(e).rstrip('.')}. Showing {catalog.DEFAULT_MODEL} instead.")
        inp = inp.with_model(catalog.DEFAULT_MODEL)
        st.session_state["_inputs"] = inp
        load_model(inp.model)
        return inp


def model(inp: Inputs) -> LoadedModel:
    """The loaded model of this rerun (app.py has loaded it already)."""
    return load_model(inp.model)


def current_run(inp: Inputs) -> Run | None:
    """The run for the sidebar sentence(s), or None (with a message in the page)."""
    if inp.cut:
        st.warning(f"The text was cut to its first {MAX_CHARS:,} characters ({inp.cut:,} characters dropped).")
    if not inp.text.strip():
        st.info("The sentence is empty: type one in the sidebar, or pick an example.")
        return None
    with st.spinner(f"Running {inp.model}..."):
        run = cached_run(inp)
    if all(t in ("[CLS]", "[SEP]") for t in run.tokens):
        st.info(
            "Nothing is left to look at: the tokenizer dropped every character of this text "
            "(control characters only?). Type some words."
        )
        return None
    if run.truncated:
        st.warning(
            f"The input is longer than the app's maximum of {run.max_length} tokens for {run.model_name} "
            "(the model's own limit, or fewer to keep every page quick): "
            f"the last {run.n_dropped} tokens were dropped."
        )
    return run


def run_or_stop(inp: Inputs) -> Run:
    """current_run, or the end of the page (its message is shown) when there is nothing to run."""
    run = current_run(inp)
    if run is None:
        st.stop()
    return run


def layer_head(run: Run, container: Any = None, head: bool = True) -> tuple[int, int]:
    """Layer and head pickers (values kept in the session and the URL), clamped to the model."""
    ss = st.session_state
    for key, n in (("layer", run.n_layers), ("head", run.n_heads)):
        if not 0 <= int(ss.get(key, 0)) < n:
            notice(f"{key} {ss.get(key)} does not exist in {run.model_name} (0..{n - 1}): showing {key} 0.")
            ss[key] = 0
    show_notices()
    box = container or st
    picked = {key: ss[key] for key in ("layer", "head")}
    counts = {"layer": run.n_layers, "head": run.n_heads if head else 0}
    boxes = box.columns(2) if head else [box]
    for col, (key, n) in zip(boxes, counts.items()):
        picked[key] = setting_widget(
            "selectbox",
            key.title(),
            key,
            container=col,
            options=list(range(n)),
            format_func=lambda i, key=key: f"{key} {i}",
        )
    return picked["layer"], picked["head"]


def token_picker(label: str, tokens: Sequence[str], default: int, key: str, container: Any = None) -> int:
    """Choose a token by position (setting `key`); labels show "position: token" so repeats stay
    distinct. Another sentence starts again at `default`."""
    return setting_widget(
        "selectbox",
        label,
        key,
        container,
        default=min(default, len(tokens) - 1),
        follows=tuple(tokens),
        options=range(len(tokens)),
        format_func=lambda i: f"{i}: {tokens[i]}",
    )


def agreement_words(rho: float) -> str:
    """How alike two rankings are, in words, from Spearman's rho: the page says no more than the number."""
    return "only loosely" if rho < 0.5 else "moderately" if rho < 0.8 else "closely"


def seed_words(counts: list[int], bold: bool = True) -> str:
    """A strict count recomputed under every bootstrap seed (mha.tasks.pruning.STRICT_SEEDS), said
    only as stable as those seeds make it: one number when all agree, else its range and how often
    (the number or range in bold, unless `bold` is False)."""
    spread = pruning.seed_spread(counts)
    b = "**" if bold else ""
    if len(spread) == 1:
        return f"{b}{spread[0][0]}{b} under all {len(counts)} bootstrap seeds"
    low, high = min(c for c, _ in spread), max(c for c, _ in spread)
    (c, k), rest = spread[0], spread[1:4]
    often = f"{c} under {k} of {len(counts)} seeds" + "".join(f", {c} under {k}" for c, k in rest)
    return f"{b}between {low} and {high}{b}, depending on the bootstrap's seed: {often}" + (
        ", ..." if len(spread) > 4 else ""
    )


def _shared_toggled(prefix: str) -> None:
    """The slider shows what is in effect: 1.0 while Shared is on, its own value back after
    (kept in "_<prefix>_alpha_before"); a page opened with Shared on (a link) kept none, so it
    goes back to the page's default alpha rather than staying at 1.0 with the panels merged."""
    ss = st.session_state
    alpha, keep = f"{prefix}_alpha", f"_{prefix}_alpha_before"
    if ss.get(f"{prefix}_shared"):
        ss[keep] = ss.get(alpha)
        ss[alpha] = 1.0
    else:
        before = ss.pop(keep, None)
        ss[alpha] = before if before is not None else SETTINGS[alpha].default


def path_controls(n_heads: int, prefix: str) -> CollapsePath | None:
    """The shared toggle, the alpha slider, the shared slice and the roles, in one row: the point
    of the collapse path they set (None, with a message, when no projection is chosen).

    Settings start with `prefix` (e.g. "collapse_alpha", declared in ui/settings.py), so each page keeps its own.
    The shared slice is the mean of the heads' slices rescaled to a slice's norm (collapse.DEFAULT_SOURCE)
    unless the plain mean or one head's slice is chosen.
    """
    c1, c2, c3, c4 = st.columns([1.3, 1.7, 1.2, 1.6])  # the toggle's label whole
    shared = setting_widget(
        "toggle", "Shared (alpha = 1)", f"{prefix}_shared", c1, on_change=lambda: _shared_toggled(prefix)
    )
    alpha = setting_widget(
        "slider",
        "alpha: distinct (0) -> shared (1)",
        f"{prefix}_alpha",
        c2,
        min_value=0.0,
        max_value=1.0,
        step=0.05,
        disabled=shared,
    )
    source = setting_widget(
        "selectbox",
        "Shared projection",
        f"{prefix}_source",
        c3,
        options=[*collapse.POOLED, *range(n_heads)],
        format_func=collapse.source_label,
        help="Rescaled mean (the default): the mean of the heads' slices, made as long as a typical slice. Plain "
        "mean: about $1/\\sqrt{h}$ as long, so every score shrinks and the one map left goes flat. Head i: that "
        "head's own slice.",
    )
    roles = setting_widget(
        "multiselect",
        "Share the projections of",
        f"{prefix}_roles",
        c4,
        options=["q", "k", "v"],
        format_func=str.upper,
        help="$W^Q$, $W^K$, $W^V$: which of the three every head shares.",
    )
    if not roles:
        st.info("Choose at least one of $W^Q, W^K, W^V$ to share.")
        return None
    return CollapsePath(1.0 if shared else float(alpha), source, tuple(roles))


def page_start() -> tuple[Inputs, Run, LoadedModel]:
    """This rerun's inputs, the run of its sentence (or the end of the page, with a message) and
    the model: the first line of a page that shows the model at work."""
    from .state import inputs

    inp = inputs()
    return inp, run_or_stop(inp), model(inp)


def stored_result_button(store, key, label: str, button_key: str, help: str) -> tuple[Any, bool]:
    """A result kept in `store` for every session, and the primary button that asks for it
    (disabled once it exists). Returns (the stored result or None, the button was pressed)."""
    result = store.get(key)
    pressed = st.button(label, type="primary", disabled=result is not None, key=button_key, help=help)
    return result, pressed


def queue_place(box: Any) -> Callable[[int], None]:
    """What a long run says in `box` while it waits for a training slot (ui.slots)."""
    from .slots import TRAINING

    def told(place: int) -> None:
        box.info(
            f"Waiting for a training slot: number {place} in this server's queue (it runs {TRAINING.n} "
            "training run(s) at a time, so that everyone's pages stay quick). It starts on its own.",
            icon=":material/hourglass_top:",
        )

    return told


def words(*terms: str) -> None:
    """The terms of this page that the glossary defines, each with its definition (an expander),
    and a link to the whole glossary. Raises StopIteration for a term the glossary lacks."""
    from mha.lesson import glossary

    def term(name: str) -> glossary.Term:  # "head width" finds "Head width, $d_k$"
        return next(t for t in glossary.TERMS if t.name.lower().startswith(name.lower()))

    from .state import inputs

    traits = model(inputs()).traits
    found = [t for t in map(term, terms) if t.applies(traits)]  # a term about another structure is left out
    with st.expander(f"The {len(found)} terms of this page", icon=":material/menu_book:"):
        st.markdown("\n\n".join(f"**{t.name}**: {t.text}" for t in found))
        st.page_link("app_pages/glossary.py", label="Every term: the glossary", icon=":material/menu_book:")


def chart(fig: Any, key: str | None = None, container: Any = None) -> None:
    """A Plotly figure across its column, and under it the figure in words, read from its data
    (plots.describe): its text alternative for a screen reader, and the key numbers for anyone."""
    from mha.plots.common import readable
    from mha.plots.describe import describe

    box = container or st
    box.plotly_chart(readable(fig), width="stretch", key=key, theme=None)
    box.expander("The chart in words", icon=":material/notes:").markdown(literal(describe(fig), limit=10_000))


def diagram(dot: str, words: str) -> None:
    """A Graphviz diagram across the column and its text alternative `words` under it."""
    st.graphviz_chart(dot, width="content")  # its own size: scaled to a column, a phone's text was 6 px
    st.expander("The diagram in words", icon=":material/notes:").markdown(literal(words, limit=10_000))


def whole_model_runs(model: Any, run: Run, runs: list[tuple[int, int]], ready: bool, key: str, what: str) -> bool:
    """Whether this rerun shows measures that run the model's layers on the sentence, once per
    (first layer, layers from it without heads: mha.models.cost.Run) in `runs`: at once when that is
    small (mha.models.cost.at_once) or already computed (`ready`, for anyone); otherwise the page says
    what it costs and offers a button (key `key`)."""
    from mha.models import cost

    T = run.n_tokens
    if ready or cost.at_once(model, T, runs):
        return True
    passes = cost.forward_passes(model, T, runs)
    about = f"{passes:.0f}" if passes >= 10 else f"{passes:.1f}"
    return _wait_for_button(
        f"Run the whole model for {what}",
        key,
        f"On your {T} tokens, {what} take {len(runs)} runs through the model's layers (each from the layer it "
        f"changes on): about {about} times the work of one pass of the model over the sentence, so they wait for "
        "the button.",
    )


def _wait_for_button(label: str, key: str, why: str) -> bool:
    """A button (key `key`) and, until it is pressed, `why` the page waits for it and how long what it
    computes is kept; whether it was pressed in this rerun."""
    pressed = st.button(label, key=key, icon=":material/play_arrow:")
    if not pressed:
        st.info(
            f"{why} The results are then kept for everyone who asks about this sentence, until other long "
            "sentences take their place.",
            icon=":material/timer:",
        )
    return pressed


def long_measures(
    model: Any, run: Run, counts: tuple[int, int, int], ready: bool, key: str, label: str, what: str
) -> bool:
    """Whether this rerun shows measures between heads that compute `counts` (runs of one layer,
    head maps measured alone, pairs of maps compared: mha.models.cost.measures_macs): at once when that is
    small next to the model's forward pass (mha.models.cost.measures_at_once) or already computed
    (`ready`, for anyone); otherwise the page says what they compute and offers a button (key `key`)."""
    from mha.models import cost

    T = run.n_tokens
    if ready or cost.measures_at_once(model, T, cost.measures_macs(model, T, *counts)):
        return True
    return _wait_for_button(
        label,
        key,
        f"On your {T} tokens, {what}. That work grows as the square of the sentence's length: on a sentence this "
        f"long it is several times the work of one pass of {model.traits.who} over it and too long to run as the page "
        "opens, so it waits for the button.",
    )


def ladder_inside(inp: Inputs, run: Run, layer: int, key: str) -> bool:
    """long_measures for the ladder's measures inside `layer` (What may be shared, the lesson's recap)."""
    model = load_model(inp.model)
    T, versions = run.n_tokens, ladder_conversions(inp.model, layer)
    return long_measures(
        model,
        run,
        ladder_counts(inp.model),
        ladder_measured(inp, layer),
        key,
        "Measure the rungs on your sentence",
        f"the ladder's {versions} converted versions of layer {layer} (its rungs, mean-pooled and rescaled) are "
        f"measured on {T} x {T} attention maps: how far each head's map moves from {model.traits.who}'s own, and "
        "how far "
        f"apart every two of their {model.n_heads} heads' maps are",
    )
