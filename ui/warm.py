"""The bundled model's (and the decoder's, once chosen) one-time results, computed in the background
once the server's first page is drawn (so they do not slow that page down) and so ready before the next page asks: the
model's task score (the heads page, the collapse page), the task score with the collapse page's
first setting shared (two 1 s runs on one core), the heads study (shipped with the package: read
and checked), the first layer's weight spectra and the bundled pool of sentences. A page that asks
while one is still being computed waits for it under its own progress message (SharedStore).

Off where $MHA_WARM is "0" (the test process, whose tests count what a page computes).
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
import threading
import time
from collections.abc import Callable

from mha.analyses.collapse import CollapsePath
from mha.models import catalog

from . import cache
from .settings import SETTINGS


def collapse_first_path() -> CollapsePath:
    """The point of the path the collapse page opens at (its settings' defaults)."""
    return CollapsePath(
        SETTINGS["collapse_alpha"].default,
        SETTINGS["collapse_source"].default,
        tuple(SETTINGS["collapse_roles"].default),
    )


def jobs(model_name: str) -> list[Callable[[], object]]:
    """Every per-model result a page asks for with its first settings, the ones most pages wait
    for first, as calls."""
    layer = SETTINGS["layer"].default
    path = collapse_first_path()
    model = cache.load_model(model_name)
    if (
        model.traits.task == "next-token"
    ):  # its heads study runs on request (minutes); its groups are measured on the pool
        last = [lambda: cache.cached_spectra(model_name, layer), lambda: cache.cached_group_diversity(model_name)]
    else:
        last = [
            lambda: cache.heads_study(model_name),
            lambda: cache.cached_spectra(model_name, layer),
            lambda: cache.cached_pool_runs(model_name),  # the pool of sentences
        ]
    return [
        lambda: cache.cached_task(model_name),  # the task score (heads and collapse pages)
        lambda: cache.cached_task_shared(model_name, (layer,), path),  # the collapse page's first setting
        lambda: cache.cached_task_shared(model_name, (layer,), path.at(1.0)),  # ... and at alpha = 1
        lambda: cache.cached_task_without(model_name, (layer,)),  # its baselines: no attention in the layer,
        lambda: cache.cached_task_without(model_name, tuple(range(cache.load_model(model_name).n_layers))),  # no head
        lambda: cache.cached_task_change(model_name, "bert", "shared", (layer,), path),  # ... and their intervals
        lambda: cache.cached_task_change(model_name, "removed", "shared", (layer,), path.at(1.0)),
        lambda: cache.cached_task_change(model_name, "bert", "removed", (layer,), path.at(1.0)),
        *last,
    ]


STOP = threading.Event()  # set at interpreter exit: the warm-up stops between jobs


def run(model_name: str) -> float:
    """Compute every job of `model_name` now (in this thread); returns the seconds it took. A job
    that fails is logged and the others still run (a page that needs its result computes it then);
    after STOP is set no new job starts."""
    started = time.perf_counter()
    failed = 0
    for n, call in enumerate(jobs(model_name)):
        if STOP.is_set():
            print(f"mha: warm-up of {model_name} stopped before job {n}", file=sys.stderr, flush=True)
            break
        try:
            call()
        except Exception as e:  # one failing job must not take the others with it
            failed += 1
            print(f"mha: warm-up job {n} of {model_name} failed: {e!r}", file=sys.stderr, flush=True)
    took = time.perf_counter() - started
    print(
        f"mha: warmed {model_name} in {took:.1f} s" + (f" ({failed} job(s) failed)" if failed else ""),
        file=sys.stderr,
        flush=True,
    )
    return took


def _stop(thread: threading.Thread) -> None:
    """At interpreter exit: let the running job finish and start no other. A daemon thread still in
    torch when the interpreter tears down aborts the process ("terminate called without an active
    exception", exit 134)."""
    STOP.set()
    thread.join(timeout=60)


def enabled() -> bool:
    """Whether servers warm the bundled model ($MHA_WARM, default on)."""
    return os.environ.get("MHA_WARM", "1") != "0"


@functools.cache
def start(model_name: str) -> threading.Thread | None:
    """Start warming `model_name` in a background thread, once per process and only for the
    bundled model and the decoder (another model's results are computed when a page asks). app.py
    calls it after each script run; returns the thread (None when nothing is warmed)."""
    if model_name not in (catalog.DEFAULT_MODEL, catalog.DECODER_MODEL) or not enabled():
        return None
    thread = threading.Thread(target=run, args=(model_name,), name="mha-warm", daemon=True)
    thread.start()
    atexit.register(_stop, thread)
    return thread
