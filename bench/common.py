"""Shared by the benchmarks: the app server's thread settings and inputs of a known length.

Imported first by every bench: it puts this checkout's root first on sys.path, so that a bench
run from a second checkout (`python bench/x.py`) measures that checkout's app and packages, not
the ones an editable install (`pip install -e .`) points at.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the checkout this bench belongs to
if sys.path[0] != str(ROOT):
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

WORDS = (
    "the quick brown fox jumps over a lazy dog while seven wizards quietly judge "
    "boxing matches in tiny rooms near old bridges"
).split()


# what a class types in the load benches (bench_load.py, bench_sizing.py): twelve one-piece words
CLASS_WORDS = "river violin planet garden engine castle forest rocket letter window thunder pencil".split()


def server_threads() -> None:
    """One BLAS/OpenMP/torch thread per computation, as app.py and ui/server.py set for the server.
    Call before numpy is imported."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    import torch

    torch.set_num_threads(int(os.environ.get("MHA_TORCH_THREADS", "1")))


def sentence(n_tokens: int, salt: int) -> str:
    """A text of exactly n_tokens tokens with [CLS] and [SEP] (all words are single pieces)."""
    return " ".join(WORDS[(i * 7 + salt) % len(WORDS)] for i in range(n_tokens - 2))


def with_progress(fn):
    """fn(progress) -> (its result, seconds, longest gap between two progress calls or the start,
    the number of progress calls)."""
    stamps = [time.perf_counter()]
    result = fn(lambda *_: stamps.append(time.perf_counter()))
    return result, stamps[-1] - stamps[0], max(b - a for a, b in zip(stamps, stamps[1:])), len(stamps) - 1


def median_seconds(fn, runs: int, warmup: int = 1) -> float:
    """Median wall time of fn() over `runs` calls, after `warmup` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
