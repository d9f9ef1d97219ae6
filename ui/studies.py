"""Long results a page asks for: a progress bar that says the time left (measured from the run's own
progress so far), and the sharing verdict (mha.studies.verdict), shipped or computed once for everyone
after a button."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import streamlit as st

from mha.models.family import LoadedModel
from mha.studies import verdict

from .cache import STUDIES, load_model, shared_run
from .server import all_cores
from .widgets import queue_place


def time_left(elapsed: float, fraction: float) -> str:
    """The time left of a run `fraction` done after `elapsed` seconds, at the rate so far, in words;
    "" until there is a rate to go by (2 s and 2 % in)."""
    if fraction < 0.02 or elapsed < 2 or fraction >= 1:
        return ""
    left = elapsed * (1 - fraction) / fraction
    return f"about {left:.0f} s left" if left < 90 else f"about {left / 60:.0f} min left"


def stopwatch() -> Callable[[], float]:
    """A function that returns the seconds since stopwatch() was called."""
    start = time.perf_counter()
    return lambda: time.perf_counter() - start


def progress_bar(box: Any, what: str) -> Callable[[int, int], None]:
    """progress(done, total) for a long run: `box` shows a bar with `what`, the count and the time left."""
    start = [None]

    def show(done: int, total: int) -> None:
        now = time.perf_counter()
        start[0] = start[0] or now
        fraction = done / total if total else 1.0
        left = time_left(now - start[0], fraction)
        box.progress(min(fraction, 1.0), text=f"{what}: {done:,} of {total:,}" + (f", {left}" if left else ""))

    return show


def _key(name: str) -> tuple[str, str]:
    return ("verdict", name)


def shipped_or_kept(name: str) -> verdict.Verdict | None:
    """The model's verdict if it exists without computing: shipped with the package, or already computed
    on this server (kept for everyone)."""
    kept = STUDIES.get(_key(name))
    if kept is not None:
        return kept
    shipped = verdict.shipped_verdict(load_model(name))
    return None if shipped is None else STUDIES.get_or_compute(_key(name), lambda: shipped)


def sharing_verdict(
    name: str, progress: Callable[[int, int], None] | None = None, told: Callable[[int], None] | None = None
) -> verdict.Verdict:
    """The model's verdict: shipped, kept, or computed by the first session that asks (on every
    core, progress(done, total) as it goes; told(place) while it waits for a training slot)."""
    found = shipped_or_kept(name)
    if found is not None:
        return found
    model = load_model(name)

    def compute() -> verdict.Verdict:
        with all_cores():
            return verdict.verdict_study(model, progress=progress)

    return shared_run(STUDIES, _key(name), compute, told)


def verdict_or_button(model: LoadedModel, key: str) -> verdict.Verdict | None:
    """The verdict of the model on screen, or (none shipped or kept for it) a note on what it costs and
    the button that computes it once for everyone, with its progress and time left. None until then."""
    found = shipped_or_kept(model.name)
    if found is not None:
        return found
    units = verdict.study_units(model, verdict.VERDICT["steps"])
    st.info(
        f"The verdict for {model.traits.who} is not shipped with the app: it converts every layer rung by rung, "
        "scores each conversion on the held-out set, removes the attention, draws random projections and uptrains "
        f"every layer of every rung ({units:,} units of work: a run of the model is 1, a layer's fit "
        f"{max(1, verdict.VERDICT['steps'] // 100)}). Computed once, it is kept for everyone on this server.",
        icon=":material/timer:",
    )
    if not st.button("Compute the verdict (once, for everyone)", key=key):
        return None
    bar = st.empty()
    result = sharing_verdict(model.name, progress_bar(bar, "Computing the verdict"), queue_place(bar))
    bar.empty()
    return result


def scored_texts_download() -> None:
    """The sentences a decoder's next-token loss is scored on (next_token.texts()), one per line, so a
    number on the page can be reproduced."""
    from mha.tasks import next_token

    texts = next_token.texts()
    st.download_button(
        f"The {len(texts)} scored sentences (.txt)",
        "\n".join(texts) + "\n",
        file_name="next_token_scored_sentences.txt",
        mime="text/plain",
        on_click="ignore",
    )
