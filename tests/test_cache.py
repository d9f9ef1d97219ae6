"""The shared result store: bounded by bytes, least recently used out first, computed once per key,
read-only for every session; and the real cached runs through it."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from mha.analyses.collapse import CollapsePath
from ui import Inputs, cache
from ui.store import SharedStore, read_only

MB = 2**20


def block(mb: float) -> np.ndarray:
    return np.zeros(int(mb * MB), dtype=np.uint8)


def test_the_store_keeps_its_bytes_under_the_budget_least_recently_used_out_first():
    store = SharedStore(size=None, budget_mb=10)
    for key in "abcd":
        store.put(key, block(3))
    assert store.bytes <= 10 * MB and list(store.items) == ["b", "c", "d"]  # "a" went first
    store.get("b")  # used: now the most recent
    store.put("e", block(3))
    assert list(store.items) == ["d", "b", "e"]
    store.put("big", block(25))  # larger than the budget: kept alone, the newest
    assert list(store.items) == ["big"] and store.bytes == 25 * MB + 0
    counted = read_only({"x": [block(1), (block(2), "text")], "y": 1.5})
    assert 3 * MB <= counted < 3 * MB + 2000


def test_entries_are_in_the_order_they_were_put_whatever_was_read_since():
    """ "The last run here" is the newest result: reading an older one must not make it the last."""
    store = SharedStore(size=3)
    for key in ("a", "b", "c"):
        store.put(key, key)
    store.get("a")  # a visitor looks at the oldest result
    assert [k for k, _ in store.entries()] == ["a", "b", "c"]
    store.put("d", "d")  # the least recently used ("b") goes; the order of the rest is when they came
    assert [k for k, _ in store.entries()] == ["a", "c", "d"]


def test_a_new_value_never_pushes_out_its_own_sentence():
    """A long sentence's run and what the page derives from it stay together, even past the
    budget (else every rerun would compute the run again); other sentences go first."""
    store = SharedStore(size=None, budget_mb=10, group=lambda key: key[1])
    store.put(("run", "short"), block(2))
    store.put(("run", "long"), block(8))
    store.put(("measures", "long"), block(3))  # over budget: the short sentence goes, not the run
    assert list(store.items) == [("run", "long"), ("measures", "long")]
    store.put(("collapse", "long"), block(1))
    assert len(store.items) == 3 and store.bytes == 12 * MB  # one sentence alone may pass the budget
    store.put(("run", "other"), block(1))  # a new sentence: the long one's results go, oldest first
    assert store.bytes <= 10 * MB and ("run", "other") in store.items


def test_values_in_the_store_are_read_only():
    store = SharedStore(size=4)
    value = {"weights": np.ones((2, 3)), "parts": [np.zeros(4)]}
    store.put("k", value)
    with pytest.raises(ValueError, match="read-only"):
        store.get("k")["weights"][0, 0] = 5.0
    with pytest.raises(ValueError, match="read-only"):
        store.get("k")["parts"][0] += 1


def test_a_value_is_computed_once_while_others_wait():
    store = SharedStore(size=None, budget_mb=1)
    calls, got = [], []

    def compute():
        calls.append(1)
        time.sleep(0.2)
        return np.arange(3)

    threads = [threading.Thread(target=lambda: got.append(store.get_or_compute("k", compute))) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and all(g is got[0] for g in got)
    assert store.computing == {}  # no lock left behind per key


def test_cached_runs_are_shared_read_only_and_equal_to_a_fresh_run(bert):
    inp = Inputs.from_raw(bert.name, "A cached run is shared by every session, never copied.")
    run = cache.cached_run(inp)
    assert cache.cached_run(inp) is run  # no copy per read (st.cache_data unpickled one each time)
    with pytest.raises(ValueError, match="read-only"):
        run.attentions[0, 0, 0, 0] = 1.0
    fresh = bert.attend(inp.text)
    np.testing.assert_array_equal(run.attentions, fresh.attentions)
    np.testing.assert_array_equal(run.hidden_states, fresh.hidden_states)
    # the engine reads a cached run without copying it into a warning or a write
    c = cache.cached_collapse(inp, 1, CollapsePath(0.5, 0))
    assert not c.weights.flags.writeable and c.weights.shape == (bert.n_heads, run.n_tokens, run.n_tokens)


def test_long_runs_stay_within_the_results_budget(bert):
    from mha.lesson.examples import DEFAULT_TEXT

    store = cache.RESULTS
    inputs = [Inputs.from_raw(bert.name, f"{n} " + " ".join([DEFAULT_TEXT] * 40)) for n in range(3)]
    for inp in inputs:  # three 512-token runs: 81 MB each, each one more than the budget alone
        run = cache.cached_run(inp)
    assert run.n_tokens == 512
    # the newest long sentence stays (over the budget, alone); the others went
    assert [k[1] for k in store.items if k[1] in inputs] == [inputs[-1]]
    assert store.bytes <= max(cache.RESULTS_MB * MB, run.attentions.nbytes + run.hidden_states.nbytes + MB)


def test_two_first_visitors_run_the_heads_study_once(monkeypatch):
    """The page checked lock.locked() and then took the lock without looking at the store again:
    two first visitors could both run the 20-60 s study. Through ui.heads_study, one runs it and
    the other waits for its result."""
    from mha.tasks import pruning

    runs, got, started = [], [], threading.Barrier(2)

    def study(model, progress=None):
        runs.append(model)
        time.sleep(0.3)
        return {"study": len(runs)}

    monkeypatch.setattr(cache, "load_model", lambda name: f"model {name}")
    monkeypatch.setattr(pruning, "heads_study", study)
    monkeypatch.setattr(pruning, "shipped_study", lambda model: None)  # no study ships for this model
    cache.STUDIES.items.pop("race-test", None)

    def visit():
        started.wait()
        got.append(cache.heads_study("race-test"))

    threads = [threading.Thread(target=visit) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert runs == ["model race-test"] and got[0] is got[1]
    assert not cache.STUDIES.busy("race-test")
    cache.STUDIES.items.pop("race-test", None)


def test_overlapping_all_cores_calls_leave_the_servers_thread_count():
    """all_cores restored the count it read in its own thread: with two overlapping calls the
    second read the first's "all cores" and left it behind. Counted under a lock, the count goes
    back to the server's setting when the last call ends, in either order."""
    import torch

    from ui import server

    base = server.server_threads()
    torch.set_num_threads(base)
    every = os.cpu_count() or 1
    for first_out in (True, False):
        a, b = server.all_cores(), server.all_cores()
        a.__enter__()
        b.__enter__()
        assert torch.get_num_threads() == every
        (a if first_out else b).__exit__(None, None, None)
        assert torch.get_num_threads() == every  # the other one still runs
        (b if first_out else a).__exit__(None, None, None)
        assert torch.get_num_threads() == base
    results = []

    def overlapping(delay):
        with server.all_cores():
            time.sleep(delay)
            results.append(torch.get_num_threads())

    threads = [threading.Thread(target=overlapping, args=(d,)) for d in (0.1, 0.3)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join()
    assert results == [every, every] and torch.get_num_threads() == base


def test_the_warm_up_computes_what_the_pages_ask_first(monkeypatch):
    """A fresh server's first visitor of the collapse, heads and subspaces pages does not wait for
    per-model work: ui.warm computes it once the first page is drawn. Here, after warm.run, those
    pages at their first settings compute no per-model result and no study themselves."""
    from streamlit.testing.v1 import AppTest

    from livetest import ROOT
    from mha.models.catalog import DEFAULT_MODEL
    from ui import warm

    for store in (cache.MODEL, cache.STUDIES):
        store.clear()
    assert warm.run(DEFAULT_MODEL) > 0
    warmed = {store: set(store.items) for store in (cache.MODEL, cache.STUDIES)}
    assert len(warmed[cache.MODEL]) == 10 and warmed[cache.STUDIES] == {DEFAULT_MODEL}
    computed = []
    for store in warmed:
        monkeypatch.setattr(store, "put", lambda key, value, put=store.put: (computed.append(key), put(key, value)))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    for page in ("collapse.py", "heads_needed.py", "subspaces.py"):
        at.switch_page(f"app_pages/{page}").run()
        assert not at.exception, [e.value for e in at.exception]
        assert at.get("plotly_chart"), page
    assert computed == [], computed
    # only the bundled model is warmed, and only where $MHA_WARM is not "0"
    assert warm.start.__wrapped__("some/other-model") is None
    monkeypatch.setenv("MHA_WARM", "0")
    assert warm.start.__wrapped__(DEFAULT_MODEL) is None


def test_a_failing_warm_up_job_is_logged_and_the_others_still_run(monkeypatch, capsys):
    from ui import warm

    ran = []

    def boom():
        raise RuntimeError("no disk")

    monkeypatch.setattr(warm, "jobs", lambda name: [lambda: ran.append(1), boom, lambda: ran.append(3)])
    warm.run("some-model")
    assert ran == [1, 3]
    err = capsys.readouterr().err
    assert "job 1 of some-model failed: RuntimeError('no disk')" in err and "(1 job(s) failed)" in err


def test_a_process_that_exits_while_warming_exits_cleanly():
    """A script (an AppTest run, a server stopped in its first seconds) that ends while the warm-up
    is in torch used to abort ("terminate called without an active exception", exit 134): the
    warm-up now finishes its job and starts no other."""
    import subprocess
    import sys

    from livetest import ROOT

    code = (  # a job that is surely in torch when the script ends (the real jobs take 0.1-3 s each)
        "import time, torch\n"
        "from ui import warm\n"
        "from mha.models.catalog import DEFAULT_MODEL\n"
        "warm.jobs = lambda name: [lambda: [torch.randn(300, 300) @ torch.randn(300, 300) for _ in range(3000)],\n"
        "                          lambda: print('second job ran')]\n"
        "assert warm.start.__wrapped__(DEFAULT_MODEL) is not None\n"
        "time.sleep(0.5)\n"
    )
    env = {**os.environ, "MHA_WARM": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "terminate called" not in done.stderr and "stopped before job 1" in done.stderr
    assert "second job ran" not in done.stdout  # no new job after the exit began
