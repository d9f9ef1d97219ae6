"""Cached engine calls. The model is the one st.cache_resource (loaded once per process, shared
read-only); every other result is computed once and shared read-only by every session through a
SharedStore (store.py), in one of these stores:

- RESULTS: per-sentence results (calls whose first argument is the rerun's Inputs), at most
  RESULTS_MB MB, or the results of the one sentence in view if they alone are more;
- MODEL: per-model results (the pool's runs, the uptraining inputs, weight spectra, task scores);
- EXPERIMENTS, UPTRAINS, STUDIES: long runs kept for everyone (training runs, uptrainings, heads
  studies), computed by the first session that asks, with its progress bar, while others wait.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import inspect
import os
import sys
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

import streamlit as st

from mha.analyses import atlas, collapse, groups, ladder, subspaces, uptrain
from mha.analyses.collapse import CollapsePath
from mha.models import catalog
from mha.models.family import LoadedModel
from mha.models.run import Run
from mha.tasks import next_token, pruning, similarity

from . import server, slots
from .state import Inputs
from .store import SharedStore


def load_model(name: str, _progress: catalog.Progress | None = None) -> LoadedModel:
    """The shared, read-only model (one per process and name); _progress(fraction, message) hears
    how a first fetch goes (not part of the key). One decoder is resident at a time
    (_resident_decoder): SmolLM2 and Gemma 3 side by side would pass Community Cloud's memory."""
    if catalog.spec_of(name).source == "decoder":
        return _resident_decoder(name, _progress)
    return _encoder(name, _progress)


@st.cache_resource(show_spinner=False, max_entries=2)
def _encoder(name: str, _progress: catalog.Progress | None = None) -> LoadedModel:
    """An encoder (or a saved model of any family, "local"), cached by Streamlit."""
    return _load(name, _progress)


_DECODER: dict[str, LoadedModel] = {}  # at most one: the decoder the last session asked for
_DECODER_LOCK = threading.Lock()


def _resident_decoder(name: str, progress: catalog.Progress | None) -> LoadedModel:
    """The decoder `name`, loaded once; asking for another drops this one first (and collects it), so
    that the process never holds two (a session still running on the old one keeps it until it ends)."""
    with _DECODER_LOCK:
        if name not in _DECODER:
            for old in _DECODER:
                forget_results_of(old)
            _DECODER.clear()
            gc.unfreeze()  # the old decoder was frozen with the modules at its load
            server.release_memory(every=0)  # collected, and its memory back to the system first
            _DECODER[name] = _load(name, progress)
        return _DECODER[name]


def _load(name: str, progress: catalog.Progress | None) -> LoadedModel:
    t0 = time.perf_counter()
    model = catalog.load_model(name, progress)
    print(f"mha: loaded {name} in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    server.freeze_startup()  # the model and every module: never garbage, never scanned again
    # what reading it freed goes back to the system: Gemma 3's tokenizer (262,144 pieces) leaves
    # ~210 MB in glibc's arenas once its JSON is parsed
    server.release_memory(every=0)
    return model


RESULTS_MB = int(os.environ.get("MHA_CACHE_MB", "64"))  # one 512-token run of the bundled model: 81 MB
RESULTS = SharedStore(size=None, budget_mb=RESULTS_MB, group=lambda key: key[1].group)  # key[1]: the Inputs
MODEL = SharedStore(size=None, budget_mb=128)  # two layers' uptraining inputs of bert-base: 117 MB
EXPERIMENTS = SharedStore(16)
UPTRAINS = SharedStore(16)
STUDIES = SharedStore(8)  # per model: its heads study and its sharing verdict


def forget_results_of(name: str) -> None:
    """Drop the per-sentence and per-model results of the model `name` (a decoder leaving memory):
    they would hold its runs beside the next decoder's. The long runs (studies, trainings) stay."""

    def of_model(key: Hashable) -> bool:  # (function, Inputs or model name, ...)
        first = key[1] if len(key) > 1 else None
        return first == name or getattr(first, "model", None) == name

    for store in (RESULTS, MODEL):
        store.drop(of_model)


def clear() -> None:
    """Forget every model and result (tests that put another model behind the name "local")."""
    _encoder.clear()
    with _DECODER_LOCK:
        _DECODER.clear()
    for store in (RESULTS, MODEL, EXPERIMENTS, UPTRAINS, STUDIES):
        store.clear()


def shared_in(store: SharedStore) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Cache fn(*args) in `store` by the value of its arguments (all hashable), computed once. The
    key holds every argument, defaults filled in: f(m) and f(m, ()) are one result."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(fn)

        def key(args: tuple) -> tuple:
            bound = signature.bind(*args)
            bound.apply_defaults()
            return (fn.__name__, *bound.args)

        def compute(k: tuple) -> Any:
            value = fn(*k[1:])
            server.release_memory()  # at once if this grew the process by 64 MB (a long sentence)
            return value

        @functools.wraps(fn)
        def call(*args: Any) -> Any:
            k = key(args)
            return store.get_or_compute(k, lambda: compute(k))

        call.ready = lambda *args: store.get(key(args)) is not None  # computed already, for anyone
        return call

    return wrap


per_sentence, per_model = shared_in(RESULTS), shared_in(MODEL)


def shared_run(
    store: SharedStore, key: Hashable, compute: Callable[[], Any], told: Callable[[int], None] | None = None
) -> Any:
    """A long run kept for everyone: the stored result, or compute() (which reports its own
    progress) by the first session that asks, once a training slot is free (ui.slots: told(place)
    while it queues); a session asking meanwhile waits for that result."""

    def in_turn() -> Any:
        with slots.TRAINING.turn(told):
            return compute()

    return store.get_or_compute(key, in_turn)


@per_sentence
def cached_run(inp: Inputs) -> Run:
    """BERT's attentions and hidden states for one sentence (or pair), cached by value. Garbage
    goes first: the store has dropped the last sentence's results, but the last page's namespace
    (a reference cycle) may hold its run until a collection (at 512 tokens on bert-base, 0.2 GiB
    more at the next page's peak). What the forward pass freed goes back to the system at once
    (on a long sentence, as much again as the run keeps), before the page builds on the run."""
    server.release_memory(every=0)  # the garbage, and what the last script runs freed, before this run allocates
    run = load_model(inp.model).attend(inp.text, inp.text_b)
    server.release_memory(every=0)
    return run


def attention_download(
    inp: Inputs, kind: str, layer: int | None = None, head: int | None = None
) -> Callable[[], bytes]:
    """attention_file for a download button, built when it is clicked (not a lambda: see attention_file)."""
    return functools.partial(attention_file, inp, kind, layer, head)


def attention_file(inp: Inputs, kind: str, layer: int | None = None, head: int | None = None) -> bytes:
    """A download of the sentence's attention, built when the button is clicked (pass it as
    functools.partial(attention_file, inp, ...): a lambda in a page would keep the page's whole
    namespace, its run included, alive for as long as the session keeps the button). kind "npz":
    every layer and head; "csv": `layer`'s heads (or one `head`) in long format."""
    from mha.analyses import export

    run = cached_run(inp)
    if kind == "npz":
        return export.to_npz(run.attentions, run.tokens)
    return export.to_csv(run.attentions, run.tokens, [layer], None if head is None else [head])


@per_sentence
def cached_collapse(inp: Inputs, layer: int, path: CollapsePath) -> collapse.LayerCollapse:
    """One layer at a point of the path to shared projections, with its measures (on copies)."""
    return collapse.collapse_layer(load_model(inp.model), cached_run(inp), layer, path)


def cached_sweep(inp: Inputs, layer: int, path: CollapsePath) -> list[dict[str, float]]:
    """The measures at alpha = 0, 0.1, ..., 1 on the path's source and roles (not its alpha):
    collapse.alpha_sweep, each point kept on its own."""
    return [_sweep_point(inp, layer, path.at(a)) for a in collapse.sweep_alphas()]


def sweep_ends(inp: Inputs, layer: int, path: CollapsePath) -> list[dict[str, float]]:
    """The sweep's first and last points (alpha = 0 and 1), the same as cached_sweep's: what the
    collapse page compares with when the points between wait for a button."""
    return [_sweep_point(inp, layer, path.at(a)) for a in (0.0, 1.0)]


def sweep_ready(inp: Inputs, layer: int, path: CollapsePath) -> bool:
    """Whether every point of the sweep is computed for this sentence."""
    return all(_sweep_point.ready(inp, layer, path.at(a)) for a in collapse.sweep_alphas())


@per_sentence
def _sweep_point(inp: Inputs, layer: int, path: CollapsePath) -> dict[str, float]:
    return collapse.collapse_layer(load_model(inp.model), cached_run(inp), layer, path).summary()


@per_sentence
def cached_whole_model(inp: Inputs, layers: tuple[int, ...], path: CollapsePath) -> dict[str, float]:
    """How much the final hidden states move when `layers` are at a point of the path."""
    return collapse.whole_model_effect(load_model(inp.model), cached_run(inp), layers, path)


@per_sentence
def cached_output_cosine(inp: Inputs, layer: int, path: CollapsePath) -> float:
    """collapse.output_cosine: the layer's attention output at a point of the path against the model's own."""
    return collapse.output_cosine(load_model(inp.model), cached_run(inp), layer, path)


@per_sentence
def cached_measures(inp: Inputs) -> dict:
    """Every per-head measure of the run, (L, H) each, with pattern labels."""
    return atlas.measures(cached_run(inp))


@per_sentence
def cached_token_views(inp: Inputs, token: int) -> dict:
    """Raw attention, rollout and value-weighted attention of one token across layers."""
    return atlas.token_views(load_model(inp.model), cached_run(inp), token)


@per_sentence
def cached_layer_maps(inp: Inputs, layer: int, path: CollapsePath) -> subspaces.HeadMaps:
    """Each head's 2-D query/key picture of one layer at a point of the path."""
    return subspaces.layer_maps(load_model(inp.model), cached_run(inp), layer, path)


def cached_alpha_frames(inp: Inputs, layer: int, path: CollapsePath) -> list[tuple[float, subspaces.HeadMaps]]:
    """The pictures at alpha = 0, 0.1, ..., 1 (points only), for the animation (not the path's alpha)."""
    return _frames(inp, layer, path.at(1.0))


@per_sentence
def _frames(inp: Inputs, layer: int, path: CollapsePath) -> list[tuple[float, subspaces.HeadMaps]]:
    return subspaces.alpha_frames(load_model(inp.model), cached_run(inp), layer, path)


@per_model
def cached_pool_runs(model_name: str) -> list[Run]:
    """The bundled pool of short sentences through the model (once per model)."""
    return subspaces.pool_runs(load_model(model_name))


@per_sentence
def cached_pool(inp: Inputs, layer: int) -> tuple[subspaces.Pool, subspaces.HeadMaps]:
    """The learner's sentence (first) and the bundled ones, pooled at one layer, with their pictures."""
    p = subspaces.pool_spaces(load_model(inp.model), [cached_run(inp), *cached_pool_runs(inp.model)], layer)
    return p, subspaces.pool_maps(p)


@per_model
def cached_spectra(model_name: str, layer: int) -> subspaces.WeightSpectra:
    """The singular values of one layer's query and key projections."""
    return subspaces.weight_spectra(load_model(model_name).scratch_layer(layer))


def cached_ladder(inp: Inputs, layer: int, rescale: bool = False, whole: bool = True) -> list[ladder.RungMeasures]:
    """Every rung of the ladder MHA -> GQA -> MQA -> shared for one layer, measured (pooled
    projections rescaled to their groups' norm if `rescale`); the sentence cosines (the layers
    after `layer` run once per rung: ladder_finals) only with `whole`, else None."""
    measured = _ladders(inp, layer)[int(rescale)]
    if not whole:
        return measured
    finals = _ladder_finals(inp, layer)[int(rescale)]
    return [dataclasses.replace(m, sentence_cosine=f) for m, f in zip(measured, finals)]


def ladder_rungs(model: LoadedModel) -> tuple[list[ladder.Rung], list[ladder.Rung]]:
    """The ladder's rungs plainly mean-pooled and rescaled."""
    plain, scaled = (ladder.rungs(model.n_heads, rescale, model.traits.kv_groups) for rescale in (False, True))
    return plain, scaled


def ladder_modules(model: LoadedModel, layer: int) -> tuple[list[ladder.Rung], list[ladder.Rung], list]:
    """The ladder's rungs plainly mean-pooled and rescaled, and each one's module of `layer`."""
    original = model.scratch_layer(layer)
    plain, scaled = ladder_rungs(model)
    return plain, scaled, [r.module(original) for r in plain + scaled]


@per_sentence
def _ladders(inp: Inputs, layer: int) -> tuple[list[ladder.RungMeasures], list[ladder.RungMeasures]]:
    """The ladder plainly mean-pooled and rescaled, measured inside the layer (no sentence cosine)."""
    model = load_model(inp.model)
    plain, scaled, modules = ladder_modules(model, layer)
    every = ladder.ladder_measures(model, cached_run(inp), layer, list(zip(plain + scaled, modules)), whole=False)
    return every[: len(plain)], every[len(plain) :]


@per_sentence
def _ladder_finals(inp: Inputs, layer: int) -> tuple[list[float], list[float]]:
    """The sentence cosine of every rung, plainly mean-pooled and rescaled (ladder.ladder_finals)."""
    model = load_model(inp.model)
    plain, _, modules = ladder_modules(model, layer)
    finals = ladder.ladder_finals(model, cached_run(inp), layer, modules)
    return finals[: len(plain)], finals[len(plain) :]


def ladder_measured(inp: Inputs, layer: int) -> bool:
    """Whether the ladder's measures inside the layer are computed for this sentence."""
    return _ladders.ready(inp, layer)


def ladder_counts(model_name: str) -> tuple[int, int, int]:
    """What the ladder's measures inside a layer compute (ladder.ladder_counts), for its rungs
    plainly mean-pooled and rescaled."""
    plain, scaled = ladder_rungs(load_model(model_name))
    return ladder.ladder_counts(plain + scaled)


def ladder_conversions(model_name: str, layer: int) -> int:
    """How many of the ladder's versions of `layer`, plainly mean-pooled and rescaled, change the model's own."""
    return len(ladder_runs(model_name, layer)) - 2  # ladder_runs: one run per changed rung, then two baselines


def ladder_ready(inp: Inputs, layer: int) -> bool:
    """Whether the ladder's sentence cosines and its baselines' are computed for this sentence."""
    return _ladder_finals.ready(inp, layer) and cached_baselines.ready(inp, layer, True)


def ladder_runs(model_name: str, layer: int) -> list[tuple[int, int]]:
    """The runs behind the ladder's sentence cosines, as (first layer, layers from it without
    heads; mha.models.cost.Run): one from `layer` per rung that changes it (plainly mean-pooled and
    rescaled), the layer's baseline (that layer without heads) and the model without any head."""
    model = load_model(model_name)
    own = model.scratch_layer(layer).role_heads
    plain, scaled = ladder_rungs(model)
    return [(layer, 0)] * sum(r.heads != own for r in plain + scaled) + [(layer, 1), (0, model.n_layers)]


@per_model
def cached_group_diversity(model_name: str) -> groups.GroupDiversity:
    """Within- and across-group head diversity of a grouped-query model over the bundled pool."""
    model = load_model(model_name)
    per_text = [groups.layer_diversity(r.attentions) for r in cached_pool_runs(model_name)]
    return groups.group_diversity(per_text, model.n_heads, model.traits.kv_groups)


@per_sentence
def cached_baselines(inp: Inputs, layer: int, whole: bool = True) -> ladder.Baselines:
    """The layer without attention and the model without any head, on the sentence (the whole-model
    cosines only with `whole`)."""
    return ladder.baselines(load_model(inp.model), cached_run(inp), layer, whole)


@per_sentence
def cached_removal(inp: Inputs, layers: tuple[int, ...]) -> dict[str, float]:
    """How much the final hidden states move when every head of `layers` is removed."""
    return collapse.removal_effect(load_model(inp.model), cached_run(inp), layers)


@per_model
def layer_inputs(model_name: str, layer: int) -> tuple:
    """The generated sentences' hidden states entering one layer (shared; uptrain copies them)."""
    return load_model(model_name).layer_inputs(uptrain.generated_sentences(), layer)


@per_model
def cached_task(
    model_name: str, removed: tuple[tuple[int, int], ...] = ()
) -> similarity.TaskScore | next_token.LossScore:
    """The model's score on its own task (yardstick.of) with the `removed` (layer, head)s gone."""
    model = load_model(model_name)
    return _task_of(model).evaluate(model, head_mask=similarity.head_mask(model, removed) if removed else None)


def _task_of(model: LoadedModel):
    """The module of the model's own task (Traits.task): similarity or next_token."""
    return next_token if model.traits.task == "next-token" else similarity


def cached_task_without(model_name: str, layers: tuple[int, ...]) -> similarity.TaskScore:
    """The model's Spearman on the bundled pairs with every head of `layers` removed (a baseline)."""
    n_heads = load_model(model_name).n_heads
    return cached_task(model_name, tuple((i, h) for i in sorted(set(layers)) for h in range(n_heads)))


def _task_score(model_name: str, which: str, layers: tuple[int, ...], path: CollapsePath) -> similarity.TaskScore:
    """One of the collapse page's task scores: "bert" (the whole model), "removed" (every head of
    `layers` removed) or "shared" (`layers` at the point `path`)."""
    if which == "bert":
        return cached_task(model_name)
    if which == "removed":
        return cached_task_without(model_name, layers)
    return cached_task_shared(model_name, layers, path)


@per_model
def cached_task_change(
    model_name: str, before: str, after: str, layers: tuple[int, ...], path: CollapsePath
) -> tuple[float, float, float]:
    """similarity.paired_interval of the score `after` against `before` (_task_score's names): a
    bootstrap of 1,000 resamples, about 60 ms, computed once per model and setting, not per rerun."""
    return _task_of(load_model(model_name)).paired_interval(
        _task_score(model_name, before, layers, path), _task_score(model_name, after, layers, path)
    )


@per_model
def cached_task_shared(model_name: str, layers: tuple[int, ...], path: CollapsePath) -> similarity.TaskScore:
    """The model's Spearman on the bundled pairs with `layers` at a point of the path."""
    model = load_model(model_name)
    replace = {i: collapse.module_at(model.scratch_layer(i), path) for i in layers}
    return _task_of(model).evaluate(model, replace=replace)


def loss_study(
    model_name: str, progress: Callable[[int, int], None] | None = None, told: Callable[[int], None] | None = None
) -> pruning.LossStudy:
    """A decoder's "Do we need every head?" study on next-token loss, once per process, computed by
    the first session that asks (progress(done, total) as it goes; told(place) while it waits for a
    training slot); others wait for that result."""

    def compute() -> pruning.LossStudy:
        with server.all_cores():
            return pruning.loss_study(load_model(model_name), progress)

    return shared_run(STUDIES, model_name, compute, told)


def heads_study(
    model_name: str, progress: Callable[[int, int], None] | None = None, told: Callable[[int], None] | None = None
) -> pruning.HeadsStudy:
    """The "Do we need every head?" study of a model, once per process: the one shipped with the
    package if it was computed on exactly this model (pruning.shipped_study), else computed by the
    first session that asks (on every core, progress(done, total) as it goes); a session that
    asks meanwhile waits for that result instead of running the study again."""

    model = load_model(model_name)
    shipped = pruning.shipped_study(model)
    if shipped is not None:  # read, not run: no training slot
        return STUDIES.get_or_compute(model_name, lambda: shipped)

    def compute() -> pruning.HeadsStudy:
        with server.all_cores():
            return pruning.heads_study(model, progress=progress)

    return shared_run(STUDIES, model_name, compute, told)
