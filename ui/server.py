"""Once per server process: thread counts and imports that must not race in session threads;
the guard against raw clients (ui.guard) and the schedule that deletes expired classes;
the page-timing hook that bench/bench_load.py reads; memory given back after each script run;
the app's icon and style sheet (local files)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ICON = str(Path(__file__).with_name("icon.png"))  # the favicon: four heads in the app's head colours
STYLE = Path(__file__).with_name("style.css")  # the page's spacing (st.html sends a style-only file out of the flow)
TRIM_SECONDS = float(os.environ.get("MHA_TRIM_SECONDS", "2"))  # see release_memory


@functools.cache
def configure() -> None:
    """One torch thread per computation (app.py sets the BLAS/OpenMP ones before numpy loads),
    and pandas and Plotly's serialiser imported before any session imports them at once.
    Runs once per process, however often it is called."""
    import pandas  # noqa: F401
    import plotly.io
    import torch

    from classroom import schedule

    from . import guard

    guard.install()  # a raw client's clear_cache and impossible widget values
    schedule.start()  # expired classes deleted every 10 minutes by every replica

    torch.set_num_threads(server_threads())
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


_cores = {"users": 0}
_cores_lock = threading.Lock()


def server_threads() -> int:
    """The server's torch threads per computation: $MHA_TORCH_THREADS, default 1."""
    return int(os.environ.get("MHA_TORCH_THREADS", "1"))


@contextlib.contextmanager
def all_cores() -> Iterator[None]:
    """Every core for long, once-per-process computations (the heads study), then back to the
    server's threads per computation once the last such computation ends. torch's thread count
    is global to the process: the calls are counted under a lock, so overlapping calls (two
    studies of two models) neither restore too early nor leave the wrong count behind."""
    import torch

    with _cores_lock:
        _cores["users"] += 1
        torch.set_num_threads(os.cpu_count() or 1)
    try:
        yield
    finally:
        with _cores_lock:
            _cores["users"] -= 1
            if _cores["users"] == 0:
                torch.set_num_threads(server_threads())


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (macOS, Windows, musl)
        return None


_trimmed = {"at": 0.0}
_trim_lock = threading.Lock()


def release_memory(every: float | None = None) -> None:
    """Give the memory freed by script runs back to the system (glibc's malloc_trim), at most
    once per `every` seconds (TRIM_SECONDS: $MHA_TRIM_SECONDS, default 2) and never in two
    threads at once.

    glibc keeps freed blocks of big arrays in its per-thread arenas, and every script run is a
    new thread: over 120 sentences (in one process) RSS grew ~200 MB more without this. A trim
    takes ~3 ms alone, but locks the arenas: after every run, 8 busy sessions saw their median
    page update go from 0.10 s to 0.52 s (bench/bench_load.py), hence the spacing. Capping
    glibc at two arenas saved memory too but slowed the same 8 sessions (241 s against 155 s for
    the tour); a fixed mmap threshold slowed BERT's forward pass by half (a page fault for every
    large temporary). A run after which RSS has grown by TRIM_GROWTH (64 MB) since the last trim
    is trimmed at once: a 512-token sentence on bert-base leaves ~300 MB in the arenas, and the
    next page's run would add its own on top. Elsewhere than glibc: nothing to do.

    A full garbage collection comes first, even while another thread trims: a page's module
    namespace is a reference cycle (its functions point back to it), so the last page's 512-token
    run lived on until Python's own collector ran, well after the store had let it go. After
    freeze_startup, a full collection scans only what was made since: ~2 ms instead of ~250 ms.
    """
    every = TRIM_SECONDS if every is None else every
    libc = _libc()
    now = time.monotonic()
    if libc is None or not hasattr(libc, "malloc_trim"):
        return
    grown = _rss() - _trimmed.get("rss", 0) > TRIM_GROWTH  # a long sentence's run: trim now, not in 2 s
    if now - _trimmed["at"] < every and not grown:
        return
    gc.collect()  # in every thread that is due, one that finds the trim busy too
    if _trim_lock.acquire(blocking=False):
        try:
            libc.malloc_trim(0)
            _trimmed["at"], _trimmed["rss"] = time.monotonic(), _rss()
        finally:
            _trim_lock.release()


TRIM_GROWTH = 64 * 2**20  # bytes of RSS gained since the last trim that trigger one at once


def _rss() -> int:
    """This process's resident memory in bytes (Linux /proc; 0 where there is none)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def freeze_startup() -> None:
    """Move every object alive now (modules, the loaded models) out of the garbage collector's
    view (gc.freeze): release_memory's full collections then scan only newer objects. Called on
    every model load, it unfreezes and collects everything first: what the last freeze caught
    and has since become garbage (another session's page namespace mid-run, a model evicted from
    load_model's cache) is a reference cycle that a frozen collector would never free."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()
