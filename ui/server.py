"""Once per server process: thread counts and imports that must not race in session threads;
the page-timing hook that bench/bench_load.py reads; the app's icon (a local file)."""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Iterator
from pathlib import Path

ICON = str(Path(__file__).with_name("icon.png"))  # the favicon: four heads in the app's head colours


@functools.cache
def configure() -> None:
    """One torch thread per computation (app.py sets the BLAS/OpenMP ones before numpy loads),
    and pandas and Plotly's serialiser imported before any session imports them at once.
    Runs once per process, however often it is called."""
    import pandas  # noqa: F401
    import plotly.io
    import torch

    torch.set_num_threads(int(os.environ.get("MHA_TORCH_THREADS", "1")))
    plotly.io.to_json({"data": [], "layout": {}})


@contextlib.contextmanager
def timed(page: str) -> Iterator[None]:
    """Append one script run's duration to $MHA_TIMING_LOG, if set (bench/bench_load.py)."""
    started = time.perf_counter()
    try:
        yield
    finally:
        path = os.environ.get("MHA_TIMING_LOG")
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(f"{page}\t{time.perf_counter() - started:.4f}\n")


@contextlib.contextmanager
def all_cores() -> Iterator[None]:
    """Every core for one long, once-per-process computation (the heads study), then back to the
    server's one thread per computation."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or 1)
    try:
        yield
    finally:
        torch.set_num_threads(before)
