"""Cached engine calls: the model once per process, results by value, every cache bounded.

The model is loaded once per process (st.cache_resource) and shared read-only by every
session; per-sentence results are cached by value (st.cache_data) in caches bounded by the
length of the input, so that a few long inputs cannot push out, or pile up beside, many short
ones. Every call takes the rerun's `Inputs` first.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
import streamlit as st

from mha import atlas, bert, collapse, sharing, subspaces, task

from .state import Inputs


@st.cache_resource(show_spinner=False, max_entries=2)
def load_model(name: str) -> bert.LoadedBert:
    """The shared, read-only model (one per process and name)."""
    t0 = time.perf_counter()
    model = bert.load_bert(name)
    print(f"mha: loaded {name} in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return model


TIERS = ((300, 64), (1500, 4), (None, 2))  # (up to this many characters, cache entries)


def _tiered(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Cache fn(inputs, *rest) by value in three bounded caches by input length (about 75 MB of
    attention for one input at 512 tokens)."""
    caches = []
    for n, (_, entries) in enumerate(TIERS):

        def tier(*args, _fn=fn):
            return _fn(*args)

        tier.__qualname__ = tier.__name__ = f"{fn.__name__}_tier{n}"
        caches.append(st.cache_data(show_spinner=False, max_entries=entries)(tier))

    def call(inp: Inputs, *rest):
        n = next(i for i, (limit, _) in enumerate(TIERS) if limit is None or inp.size <= limit)
        return caches[n](inp, *rest)

    call.__doc__, call.__name__ = fn.__doc__, fn.__name__
    call.clear = lambda: [c.clear() for c in caches]
    return call


@_tiered
def cached_run(inp: Inputs) -> bert.BertRun:
    """BERT's attentions and hidden states for one sentence (or pair), cached by value."""
    return load_model(inp.model).attend(inp.text, inp.text_b)


@_tiered
def cached_collapse(
    inp: Inputs, layer: int, alpha: float, source: int | str, roles: tuple[str, ...]
) -> collapse.LayerCollapse:
    """One layer on the path to shared projections, with its measures (copies of the weights)."""
    return collapse.collapse_layer(load_model(inp.model), cached_run(inp), layer, alpha, source, roles)


@st.cache_data(show_spinner=False, max_entries=32)
def cached_sweep(inp: Inputs, layer: int, source: int | str, roles: tuple[str, ...]) -> list[dict[str, float]]:
    """The measures at alpha = 0, 0.1, ..., 1 for one layer."""
    return collapse.alpha_sweep(load_model(inp.model), cached_run(inp), layer, source, roles)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_whole_model(
    inp: Inputs, layers: tuple[int, ...], alpha: float, source: int | str, roles: tuple[str, ...]
) -> dict[str, float]:
    """How much the final hidden states move when `layers` share projections."""
    return collapse.whole_model_effect(load_model(inp.model), cached_run(inp), layers, alpha, source, roles)


@st.cache_data(show_spinner=False, max_entries=64)
def cached_measures(inp: Inputs) -> dict:
    """Every per-head measure of the run, (L, H) each, with pattern labels."""
    return atlas.measures(cached_run(inp))


@st.cache_data(show_spinner=False, max_entries=64)
def cached_token_views(inp: Inputs, token: int) -> dict:
    """Raw attention, rollout and value-weighted attention of one token across layers."""
    return atlas.token_views(load_model(inp.model), cached_run(inp), token)


class SharedStore:
    """A small store shared by every session: the `size` most recently used values by key."""

    def __init__(self, size: int = 16) -> None:
        self.size, self.items, self.lock = size, OrderedDict(), threading.Lock()
        self.computing: dict[Hashable, threading.Lock] = {}

    def lock_for(self, key: Hashable) -> threading.Lock:
        """A lock per key: hold it while computing the value, so a second session waits for the
        first one's result instead of computing it again."""
        with self.lock:
            return self.computing.setdefault(key, threading.Lock())

    def get(self, key: Hashable) -> Any:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
            return self.items.get(key)

    def put(self, key: Hashable, value: Any) -> None:
        with self.lock:
            self.items[key] = value
            while len(self.items) > self.size:
                self.items.popitem(last=False)


@st.cache_resource(show_spinner=False)
def experiments() -> SharedStore:
    """Results of the training experiment, kept per settings for every session."""
    return SharedStore()


@_tiered
def cached_layer_maps(
    inp: Inputs, layer: int, alpha: float, source: int | str, roles: tuple[str, ...]
) -> subspaces.HeadMaps:
    """Each head's 2-D query/key picture of one layer on the path to shared projections."""
    return subspaces.layer_maps(load_model(inp.model), cached_run(inp), layer, alpha, source, roles)


@_tiered
def cached_alpha_frames(
    inp: Inputs, layer: int, source: int | str, roles: tuple[str, ...]
) -> list[tuple[float, subspaces.HeadMaps]]:
    """The pictures at alpha = 0, 0.1, ..., 1 (points only), for the animation."""
    return subspaces.alpha_frames(load_model(inp.model), cached_run(inp), layer, source, roles)


@st.cache_data(show_spinner=False, max_entries=2)
def cached_pool_runs(model_name: str) -> list[bert.BertRun]:
    """The bundled pool of short sentences through the model (once per model)."""
    model = load_model(model_name)
    return [model.attend(text) for text in subspaces.pool_sentences()]


@st.cache_data(show_spinner=False, max_entries=16)
def cached_pool(inp: Inputs, layer: int) -> tuple[subspaces.Pool, subspaces.HeadMaps]:
    """The learner's sentence (first) and the bundled ones, pooled at one layer, with their pictures."""
    p = subspaces.pool(load_model(inp.model), [cached_run(inp), *cached_pool_runs(inp.model)], layer)
    return p, subspaces.pool_maps(p)


@st.cache_data(show_spinner=False, max_entries=32)
def cached_spectra(model_name: str, layer: int) -> subspaces.WeightSpectra:
    """The singular values of one layer's query and key projections."""
    return subspaces.weight_spectra(load_model(model_name).scratch_layer(layer))


@_tiered
def cached_ladder(inp: Inputs, layer: int) -> list[sharing.RungMeasures]:
    """Every rung of the ladder MHA -> GQA -> MQA -> shared for one layer, measured."""
    model = load_model(inp.model)
    run = cached_run(inp)
    return [sharing.rung_measures(model, run, layer, rung) for rung in sharing.ladder(model.n_heads)]


@st.cache_resource(show_spinner=False, max_entries=2)
def layer_inputs(model_name: str, layer: int) -> tuple:
    """The generated sentences' hidden states entering one layer (read-only, shared)."""
    return load_model(model_name).layer_inputs(sharing.generated_sentences(), layer)


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
    replace = {i: collapse.interpolate(model.scratch_layer(i), alpha, source, roles) for i in layers}
    return task.evaluate(model, replace=replace)


@st.cache_resource(show_spinner=False)
def studies() -> SharedStore:
    """The "Do we need every head?" study, once per model, for every session."""
    return SharedStore(4)
