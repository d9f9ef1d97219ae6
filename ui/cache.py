"""Cached engine calls: the model once per process, results shared read-only, every cache bounded.

The model is loaded once per process (st.cache_resource) and shared read-only by every
session. Per-sentence results (every call that takes the rerun's `Inputs` first) live in one
store shared by every session, bounded by the bytes of their arrays (least recently used out
first): no copy per read, and a fixed ceiling however many sentences come. Their numpy arrays
are made read-only, so no page can change what another session sees.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import streamlit as st

from mha import atlas, bert, collapse, ladder, subspaces, task, uptrain

from . import server
from .state import Inputs


@st.cache_resource(show_spinner=False, max_entries=2)
def load_model(name: str) -> bert.LoadedBert:
    """The shared, read-only model (one per process and name)."""
    t0 = time.perf_counter()
    model = bert.load_bert(name)
    print(f"mha: loaded {name} in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return model


RESULTS_MB = int(os.environ.get("MHA_CACHE_MB", "64"))  # one 512-token run of the bundled model: 81 MB


def read_only(value: Any) -> int:
    """Make every numpy array inside `value` (dataclasses, dicts, lists, tuples) read-only;
    returns the bytes the value holds (arrays exactly, other objects roughly)."""
    if isinstance(value, np.ndarray):
        value.setflags(write=False)
        return value.nbytes
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return 64 + sum(read_only(getattr(value, f.name)) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return 64 + sum(read_only(k) + read_only(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return 64 + sum(read_only(v) for v in value)
    return sys.getsizeof(value)


class SharedStore:
    """Values shared by every session, by key: the least recently used go first once there are
    more than `size` of them or they hold more than `budget_mb` MB. With `group` (key -> group),
    a new value never pushes out values of its own group (the results of the sentence a page is
    showing stay together, even if they alone pass the budget). Values are made read-only
    (read_only) as they come in."""

    def __init__(
        self, size: int | None = 16, budget_mb: float | None = None, group: Callable[[Hashable], Any] | None = None
    ) -> None:
        self.size, self.budget = size, None if budget_mb is None else budget_mb * 2**20
        self.group = group
        self.items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()  # key -> (value, bytes)
        self.bytes, self.lock = 0, threading.Lock()
        self.computing: dict[Hashable, threading.Lock] = {}

    def lock_for(self, key: Hashable) -> threading.Lock:
        """A lock per key: hold it while computing the value, so a second session waits for the
        first one's result instead of computing it again."""
        with self.lock:
            return self.computing.setdefault(key, threading.Lock())

    def busy(self, key: Hashable) -> bool:
        """Some session is computing `key` now (for a message; get_or_compute decides who computes)."""
        with self.lock:
            lock = self.computing.get(key)
        return lock is not None and lock.locked()

    def get(self, key: Hashable) -> Any:
        with self.lock:
            if key not in self.items:
                return None
            self.items.move_to_end(key)
            return self.items[key][0]

    def put(self, key: Hashable, value: Any) -> None:
        size = read_only(value)
        with self.lock:
            if key in self.items:
                self.bytes -= self.items.pop(key)[1]
            self.items[key] = (value, size)
            self.bytes += size
            while (self.size is not None and len(self.items) > self.size) or (
                self.budget is not None and self.bytes > self.budget
            ):
                old = next((k for k in self.items if k != key and not self._same_group(k, key)), None)
                if old is None:
                    break
                self.bytes -= self.items.pop(old)[1]

    def entries(self) -> list[tuple[Hashable, Any]]:
        """Every (key, value) held now, oldest first (a snapshot; no use is recorded)."""
        with self.lock:
            return [(k, v) for k, (v, _) in self.items.items()]

    def _same_group(self, a: Hashable, b: Hashable) -> bool:
        return self.group is not None and self.group(a) == self.group(b)

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The value of `key`, computed (once, whoever asks meanwhile waits) if it is not here."""
        value = self.get(key)
        if value is None:
            with self.lock_for(key):
                value = self.get(key)
                if value is None:
                    value = compute()
                    self.put(key, value)
            with self.lock:
                self.computing.pop(key, None)
        return value


@st.cache_resource(show_spinner=False)
def results() -> SharedStore:
    """Every session's per-sentence results: at most RESULTS_MB MB (MHA_CACHE_MB to change it),
    or the results of one sentence if they alone are more (a 512-token run of bert-base: 151 MB)."""
    return SharedStore(size=None, budget_mb=RESULTS_MB, group=lambda key: key[1])  # key[1]: the Inputs


def per_sentence(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Cache fn(inputs, *rest) in results(), by the value of its arguments (all hashable)."""

    @functools.wraps(fn)
    def call(inp: Inputs, *rest: Any) -> Any:
        return results().get_or_compute((fn.__name__, inp, *rest), lambda: fn(inp, *rest))

    return call


@per_sentence
def cached_run(inp: Inputs) -> bert.BertRun:
    """BERT's attentions and hidden states for one sentence (or pair), cached by value."""
    return load_model(inp.model).attend(inp.text, inp.text_b)


@per_sentence
def cached_collapse(
    inp: Inputs, layer: int, alpha: float, source: int | str, roles: tuple[str, ...]
) -> collapse.LayerCollapse:
    """One layer on the path to shared projections, with its measures (copies of the weights)."""
    return collapse.collapse_layer(load_model(inp.model), cached_run(inp), layer, alpha, source, roles)


@per_sentence
def cached_sweep(inp: Inputs, layer: int, source: int | str, roles: tuple[str, ...]) -> list[dict[str, float]]:
    """The measures at alpha = 0, 0.1, ..., 1 for one layer."""
    return collapse.alpha_sweep(load_model(inp.model), cached_run(inp), layer, source, roles)


@per_sentence
def cached_whole_model(
    inp: Inputs, layers: tuple[int, ...], alpha: float, source: int | str, roles: tuple[str, ...]
) -> dict[str, float]:
    """How much the final hidden states move when `layers` share projections."""
    return collapse.whole_model_effect(load_model(inp.model), cached_run(inp), layers, alpha, source, roles)


@per_sentence
def cached_measures(inp: Inputs) -> dict:
    """Every per-head measure of the run, (L, H) each, with pattern labels."""
    return atlas.measures(cached_run(inp))


@per_sentence
def cached_token_views(inp: Inputs, token: int) -> dict:
    """Raw attention, rollout and value-weighted attention of one token across layers."""
    return atlas.token_views(load_model(inp.model), cached_run(inp), token)


@st.cache_resource(show_spinner=False)
def experiments() -> SharedStore:
    """Results of the training experiment, kept per settings for every session."""
    return SharedStore()


@per_sentence
def cached_layer_maps(
    inp: Inputs, layer: int, alpha: float, source: int | str, roles: tuple[str, ...]
) -> subspaces.HeadMaps:
    """Each head's 2-D query/key picture of one layer on the path to shared projections."""
    return subspaces.layer_maps(load_model(inp.model), cached_run(inp), layer, alpha, source, roles)


@per_sentence
def cached_alpha_frames(
    inp: Inputs, layer: int, source: int | str, roles: tuple[str, ...]
) -> list[tuple[float, subspaces.HeadMaps]]:
    """The pictures at alpha = 0, 0.1, ..., 1 (points only), for the animation."""
    return subspaces.alpha_frames(load_model(inp.model), cached_run(inp), layer, source, roles)


@st.cache_resource(show_spinner=False, max_entries=2)
def cached_pool_runs(model_name: str) -> list[bert.BertRun]:
    """The bundled pool of short sentences through the model (once per model)."""
    model = load_model(model_name)
    runs = [model.attend(text) for text in subspaces.pool_sentences()]
    read_only(runs)  # shared by every session
    return runs


@per_sentence
def cached_pool(inp: Inputs, layer: int) -> tuple[subspaces.Pool, subspaces.HeadMaps]:
    """The learner's sentence (first) and the bundled ones, pooled at one layer, with their pictures."""
    p = subspaces.pool(load_model(inp.model), [cached_run(inp), *cached_pool_runs(inp.model)], layer)
    return p, subspaces.pool_maps(p)


@st.cache_data(show_spinner=False, max_entries=32)
def cached_spectra(model_name: str, layer: int) -> subspaces.WeightSpectra:
    """The singular values of one layer's query and key projections."""
    return subspaces.weight_spectra(load_model(model_name).scratch_layer(layer))


@per_sentence
def cached_ladder(inp: Inputs, layer: int) -> list[ladder.RungMeasures]:
    """Every rung of the ladder MHA -> GQA -> MQA -> shared for one layer, measured."""
    model = load_model(inp.model)
    run = cached_run(inp)
    return [ladder.rung_measures(model, run, layer, rung) for rung in ladder.rungs(model.n_heads)]


@st.cache_resource(show_spinner=False, max_entries=2)
def layer_inputs(model_name: str, layer: int) -> tuple:
    """The generated sentences' hidden states entering one layer (read-only, shared)."""
    return load_model(model_name).layer_inputs(uptrain.generated_sentences(), layer)


@st.cache_resource(show_spinner=False)
def uptrains() -> SharedStore:
    """Finished uptraining runs, kept per (model, layer, rung, steps, seed) for every session."""
    return SharedStore()


@st.cache_data(show_spinner=False, max_entries=64)
def cached_task(model_name: str, removed: tuple[tuple[int, int], ...] = ()) -> task.TaskScore:
    """The model's Spearman on the bundled pairs with the `removed` (layer, head)s gone."""
    model = load_model(model_name)
    mask = np.ones((model.n_layers, model.n_heads))
    for layer, head in removed:
        mask[layer, head] = 0.0
    return task.evaluate(model, head_mask=mask if removed else None)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_task_shared(
    model_name: str, layers: tuple[int, ...], alpha: float, source: int | str, roles: tuple[str, ...]
) -> task.TaskScore:
    """The model's Spearman on the bundled pairs with `layers` pulled towards shared projections."""
    model = load_model(model_name)
    replace = {i: collapse.module_at(model.scratch_layer(i), alpha, source, roles) for i in layers}
    return task.evaluate(model, replace=replace)


@st.cache_resource(show_spinner=False)
def studies() -> SharedStore:
    """The "Do we need every head?" study, once per model, for every session."""
    return SharedStore(4)


def heads_study(model_name: str, progress: Callable[[int, int], None] | None = None) -> task.HeadsStudy:
    """The "Do we need every head?" study of a model, once per process: the one shipped with the
    package if it was computed on exactly this model (task.shipped_study), else computed by the
    first session that asks (on every core, progress(done, total) as it goes); a session that
    asks meanwhile waits for that result instead of running the study again."""

    def compute() -> task.HeadsStudy:
        model = load_model(model_name)
        shipped = task.shipped_study(model)
        if shipped is not None:
            return shipped
        with server.all_cores():
            return task.heads_study(model, progress=progress)

    return studies().get_or_compute(model_name, compute)
