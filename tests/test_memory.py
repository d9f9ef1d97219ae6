"""The server's memory stays bounded however many sentences come: per-sentence results are capped
by bytes, and what a script run frees goes back to the system (glibc keeps it otherwise)."""

from __future__ import annotations

import gc
import os
import threading
import weakref
from pathlib import Path

import pytest

from livetest import memory_mb
from mha import plots
from mha.analyses import map_views
from ui import Inputs, cache, server

WORDS = "river violin planet garden engine castle forest rocket letter window thunder pencil".split()


def rss_mb() -> float:
    return memory_mb(os.getpid())[0]


def visit(model: str, k: int) -> None:
    """What the BERT heads page and the atlas compute for sentence k (5-305 words), in a new
    thread and followed by release_memory, as a Streamlit script run is."""
    words = 5 + (k * 37) % 300
    inp = Inputs.from_raw(model, " ".join(WORDS[(k * 7 + j) % 12] for j in range(words)) + f" {k}.")
    run = cache.cached_run(inp)
    att, labels, _ = map_views.view(run.attentions[0], run.tokens, run.word_ids, run.segment_ids)
    for fig in (plots.heads.model_view(run.attentions), plots.heads.attention_heatmap(att[0], labels, "x")):
        fig.to_json()
    cache.cached_measures(inp)
    cache.cached_token_views(inp, 1)


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc (Linux)")
def test_memory_growth_over_many_sentences_is_bounded(bert):
    def script_run(k: int) -> None:
        t = threading.Thread(target=visit, args=(bert.name, k))
        t.start()
        t.join()
        server.release_memory(every=0)

    for k in range(8):  # warm-up: first-time allocations of torch, plotly, pandas
        script_run(1000 + k)
    before = rss_mb()
    for k in range(24):
        script_run(k)
    growth = rss_mb() - before
    assert cache.RESULTS.bytes <= cache.RESULTS_MB * 2**20 + 30 * 2**20  # + one sentence (at most 305 words here)
    # without release_memory: +276 MB over 30 sentences here; with it: +58 MB
    assert growth <= cache.RESULTS_MB + 40, f"RSS grew {growth:.0f} MB over 24 sentences"


def test_memory_is_released_at_most_once_per_interval(monkeypatch):
    calls = []

    class FakeLibc:
        def malloc_trim(self, pad: int) -> int:
            calls.append(pad)
            return 1

    monkeypatch.setattr(server, "_libc", lambda: FakeLibc())
    monkeypatch.setitem(server._trimmed, "at", 0.0)
    for _ in range(5):  # five script runs ending within a second: one trim
        server.release_memory(every=10.0)
    assert calls == [0]
    server.release_memory(every=0.0)
    assert calls == [0, 0]


def test_a_dropped_model_is_freed_without_a_collection(tmp_path, monkeypatch):
    """A model dropped from the app's cache goes at once: no reference cycle through its attention
    hooks (server.freeze_startup freezes the collector on every load, and a frozen cycle was never
    freed: a 440 MB bert-base for good after every eviction)."""
    from mha.models.bert import save_random_bert
    from mha.models.catalog import load_model

    monkeypatch.setenv("MHA_MODEL_DIR", save_random_bert(tmp_path, 2, 2, 32))
    model = load_model("local")
    assert model.attend("one two three").attentions.shape == (2, 2, 5, 5)  # its hooks are in place
    gone = weakref.ref(model)
    gc.disable()
    try:
        del model
        assert gone() is None, [type(r).__name__ for r in gc.get_referrers(gone())]
    finally:
        gc.enable()
