"""The verdict of sharing: every rung of the ladder (mha/analyses/ladder.py) scored on the model's own
task, on held-out data, with every layer converted as Ainslie et al. (2023) convert a checkpoint,
beside attention removed, a random floor and the rung uptrained; and with one layer converted alone.

- The task (Traits.task): a sentence encoder's Spearman on the STS Benchmark's dev pairs (Cer et al.
  2017; mha/tasks/similarity.py), a decoder's next-token loss on the dev sentences of
  mha/tasks/next_token.py. Nothing here is tuned on them: the conversions are fixed rules, the
  uptraining fits generated sentences (mha/analyses/uptrain.py).
- Every layer converted (the ladder's rungs, plainly mean-pooled and rescaled); beside them: every
  head of every layer removed; a floor, the same structure with random projections of the same
  shapes and norms (random_projections); and the plainly mean-pooled rung uptrained layer by layer
  (each layer fitted to the model's own layer output on its own input), then scored whole.
- One layer converted alone, every layer in turn, beside that layer's attention removed: kept as
  scores and intervals (LayerAlone), not per item.

Entries keep their per-item values (a pair's cosine, a text's summed nats), so any two can be
compared with a paired bootstrap interval (change). The bundled models' verdicts ship with the
package (data/verdict_<model>.json, scripts/sharing_verdict.py), used only for the exact weights,
data and settings they were computed on (shipped_verdict).
Shapes: N items (pairs or texts), L layers, H heads, C = d_model, T tokens.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch.nn import functional as F

from mha.analyses import ladder
from mha.analyses.uptrain import UPTRAIN_BATCH, generated_sentences, uptrain
from mha.core.attention import ROLES, MultiHeadAttention
from mha.tasks import next_token, similarity
from mha.tasks.yardstick import Yardstick

if TYPE_CHECKING:
    from mha.models.family import LoadedModel

VERDICT = {"steps": 500, "sentences": 1000, "seed": 0, "floor_seed": 0, "level": 0.9}  # what a verdict is computed with
VERSION = 1  # raise when verdict_study computes something else: a shipped verdict is then not used
MODEL, REMOVED, CONVERTED, FLOOR, UPTRAINED = "model", "removed", "converted", "floor", "uptrained"


@dataclass(frozen=True)
class Entry:
    """One variant of the model scored on the held-out set: `kind` (MODEL, REMOVED: every head of
    every layer removed, CONVERTED, FLOOR: the rung's structure with random projections,
    UPTRAINED), the rung's name and pooling ("" for the model and removal), and values (N,): each
    pair's cosine, or each text's summed nats."""

    kind: str
    rung: str
    pooling: str
    values: np.ndarray


@dataclass(frozen=True)
class Change:
    """b's score minus a's on the same items, with its central `level` paired-bootstrap interval."""

    change: float
    low: float
    high: float

    @property
    def spans_zero(self) -> bool:
        return self.low <= 0 <= self.high


@dataclass(frozen=True)
class Alone:
    """One rung converted in one layer alone: its score, its change from the model and from that
    layer's attention removed."""

    rung: str
    pooling: str
    score: float
    vs_model: Change
    vs_removed: Change


@dataclass(frozen=True)
class LayerAlone:
    """Layer `layer` changed alone: its attention removed (score, change from the model) and every
    conversion of it (Alone)."""

    layer: int
    removed: float
    removed_change: Change
    rungs: tuple[Alone, ...]


@dataclass
class Verdict:
    """Every rung of one model on its own held-out task (see the module doc).

    task: Traits.task; gold (N,): the pairs' grades (similarity), or tokens (N,): the tokens each
    text predicts (next-token); entries: the whole-model variants; alone: one per layer; fits:
    {rung: [(relative error before, after) per layer]} of the uptraining; budget: what it cost
    (steps, sentences, tokens per layer, seconds); seconds: the whole study."""

    model: str
    task: str
    gold: np.ndarray | None
    tokens: np.ndarray | None
    entries: list[Entry]
    alone: list[LayerAlone]
    fits: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    budget: dict = field(default_factory=dict)
    seconds: float = 0.0
    level: float = VERDICT["level"]
    origin: str = "computed"
    _changes: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def n_items(self) -> int:
        return len(self.entries[0].values)

    def find(self, kind: str, rung: str = "", pooling: str = "") -> Entry | None:
        """The entry of that kind, rung and pooling (the model and removal have neither)."""
        return next((e for e in self.entries if (e.kind, e.rung, e.pooling) == (kind, rung, pooling)), None)

    @property
    def model_entry(self) -> Entry:
        return next(e for e in self.entries if e.kind == MODEL)

    @property
    def removed_entry(self) -> Entry:
        return next(e for e in self.entries if e.kind == REMOVED)

    def kept(self, e: Entry) -> float:
        """The share of what attention adds to the task (the model's score against every head removed)
        that the entry keeps: 1 = all of it, 0 = no more than no attention, below 0 = worse than none.
        The same formula for a loss: both differences change sign together."""
        gone, model = self.score(self.removed_entry), self.score(self.model_entry)
        return (self.score(e) - gone) / (model - gone)

    def score(self, e: Entry) -> float:
        """Spearman of the cosines against the grades, or nats per predicted token (once per own entry)."""
        key = ("score", e.kind, e.rung, e.pooling)
        if self.find(e.kind, e.rung, e.pooling) is not e:
            return _scored(self, e).value
        if key not in self._changes:
            self._changes[key] = _scored(self, e).value
        return self._changes[key]

    def change(self, a: Entry, b: Entry, seed: int = 0) -> Change:
        """b's score minus a's with the paired bootstrap interval over the items (the same resample
        for both): similarity.paired_interval, or next_token.paired_interval (token-weighted).
        Worked out once per pair of the verdict's own entries (a page asks for 142 of them on every rerun)."""
        key = (a.kind, a.rung, a.pooling, b.kind, b.rung, b.pooling, seed)
        own = all(self.find(e.kind, e.rung, e.pooling) is e for e in (a, b))
        if own and key in self._changes:
            return self._changes[key]
        if self.task == "similarity":
            found = Change(*similarity.paired_interval(_scored(self, a), _scored(self, b), self.level))
        else:
            found = Change(*next_token.paired_interval(_scored(self, a), _scored(self, b), self.level, seed=seed))
        if own:
            self._changes[key] = found
        return found

    def layer(self, layer: int) -> LayerAlone:
        return next(a for a in self.alone if a.layer == layer)


def _scored(v: Verdict, e: Entry) -> similarity.TaskScore | next_token.LossScore:
    if v.task == "similarity":
        from scipy.stats import spearmanr

        return similarity.TaskScore(float(spearmanr(e.values, v.gold).statistic), e.values, v.gold)
    return next_token.LossScore(e.values, v.tokens)


# ---------------------------------------------------------------- the variants


def random_projections(module: MultiHeadAttention, seed: int) -> MultiHeadAttention:
    """A copy of `module` of the same structure whose W^Q, W^K, W^V are random: every projection
    slice (D x C, one per distinct projection of a role) Gaussian, scaled to that slice's
    Frobenius norm; biases and W^O kept. The floor beside a rung: its shapes and norms, no learning."""
    gen = torch.Generator().manual_seed(seed)
    D, C = module.d_head, module.d_model
    with torch.inference_mode(False), torch.no_grad():
        out = module.with_heads(module.role_heads, empty=True)
        for role, n in zip(ROLES, module.role_heads):
            src = getattr(module, f"{role}_proj")
            w = src.weight.detach().float().reshape(n, D, C)  # (n, D, C): one slice per projection
            g = torch.randn(n, D, C, generator=gen)
            g *= w.norm(dim=(1, 2), keepdim=True) / g.norm(dim=(1, 2), keepdim=True)  # each slice's norm
            out.set_projection(role, g.reshape(n * D, C).to(src.weight.dtype), src.bias)
        out.set_projection("o", module.out_proj.weight, module.out_proj.bias)
    return out.eval().requires_grad_(False)


def layer_input_stream(
    model: LoadedModel, texts: list[str], batch: int = 64
) -> Iterator[tuple[int, tuple[torch.Tensor, torch.Tensor]]]:
    """(layer, (x (N, T, C), mask (N, T))) for every layer in turn: what LoadedModel.layer_inputs
    gives for each layer, from one pass through the model (its own layers, from scratch) that keeps
    only the current layer's states."""
    parts = [model._padded(texts[s : s + batch]) for s in range(0, len(texts), batch)]  # (ids, segments, mask)
    T = max(ids.shape[1] for ids, _, _ in parts)
    mask = torch.cat([F.pad(m, (0, T - m.shape[1])) for _, _, m in parts])  # (N, T)
    with torch.inference_mode():
        hs = [model.embed(ids, seg) for ids, seg, _ in parts]  # (b, t, C) each
        for layer in range(model.n_layers):
            x = torch.cat([F.pad(model.attention_input(layer, h).float(), (0, 0, 0, T - h.shape[1])) for h in hs])
            yield layer, (x, mask)  # (N, T, C), (N, T)
            attn = model._template(layer)
            hs = [
                model._layer(layer, h, attn, None if model.traits.causal else m, None)[0]
                for h, (_, _, m) in zip(hs, parts)
            ]


def _values(model: LoadedModel, replace=None, head_mask=None) -> np.ndarray:
    """Each held-out item's value with these changes: a pair's cosine (STS dev) or a text's nats."""
    if model.traits.task == "next-token":
        return next_token.evaluate(model, head_mask=head_mask, replace=replace).per_text
    return similarity.evaluate(model, "dev", head_mask=head_mask, replace=replace).per_pair


def _items(model: LoadedModel) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(gold, tokens) of the held-out set: the grades of the STS dev pairs, or each text's predicted tokens."""
    if model.traits.task == "next-token":
        return None, next_token.evaluate(model).tokens
    return np.array([g for *_, g in similarity.sts_pairs("dev")], dtype=np.float64), None


def _removal(model: LoadedModel, layers: range | list[int]) -> np.ndarray:
    mask = np.ones((model.n_layers, model.n_heads))
    mask[list(layers)] = 0.0
    return mask


def study_units(model: LoadedModel, steps: int) -> int:
    """The work of verdict_study in the units progress() counts: one per model run (the model, every
    head removed, each rung converted and its floor in both poolings, each layer alone, each rung
    uptrained) and steps / 100 per layer fitted."""
    n, L = len(ladder.rungs(model.n_heads, False, model.traits.kv_groups)) - 1, model.n_layers
    return 2 + 4 * n + L * (1 + 2 * n) + n + n * L * max(1, steps // 100)


def verdict_study(
    model: LoadedModel,
    steps: int = VERDICT["steps"],
    progress: Callable[[int, int], None] | None = None,
) -> Verdict:
    """Every rung of the model's ladder on its own held-out task (the module doc): every layer
    converted (both poolings) with its random floor, every head removed, each rung uptrained
    (plain mean, `steps` per layer, VERDICT's sentences and seed), and each layer converted alone.
    progress(done, total) in study_units."""
    t0 = time.perf_counter()
    H, G, L = model.n_heads, model.traits.kv_groups, model.n_layers
    plain, scaled = (ladder.rungs(H, rescale, G)[1:] for rescale in (False, True))
    total, done = study_units(model, steps), [0]

    def tick(n: int = 1) -> None:
        done[0] += n
        if progress is not None:
            progress(min(done[0], total), total)

    def every_layer(rung: ladder.Rung) -> dict[int, MultiHeadAttention]:
        return {layer: rung.module(model.scratch_layer(layer)) for layer in range(L)}

    own = ladder.rungs(H, False, G)[0].name
    entries = [Entry(MODEL, own, "", _values(model))]
    tick()
    entries.append(Entry(REMOVED, "", "", _values(model, head_mask=_removal(model, range(L)))))
    tick()
    for rung in plain + scaled:
        modules = every_layer(rung)
        entries.append(Entry(CONVERTED, rung.name, rung.pooling, _values(model, replace=modules)))
        tick()
        floor = {i: random_projections(m, VERDICT["floor_seed"] + i) for i, m in modules.items()}
        entries.append(Entry(FLOOR, rung.name, rung.pooling, _values(model, replace=floor)))
        tick()
    gold, tokens = _items(model)
    partial = Verdict(model.name, model.traits.task, gold, tokens, entries, [])
    base = partial.model_entry
    alone = []
    for layer in range(L):
        gone = Entry(REMOVED, "", "", _values(model, head_mask=_removal(model, [layer])))
        tick()
        rows = []
        for rung in plain + scaled:
            one = {layer: rung.module(model.scratch_layer(layer))}
            e = Entry(CONVERTED, rung.name, rung.pooling, _values(model, replace=one))
            rows.append(
                Alone(rung.name, rung.pooling, partial.score(e), partial.change(base, e), partial.change(gone, e))
            )
            tick()
        alone.append(LayerAlone(layer, partial.score(gone), partial.change(base, gone), tuple(rows)))
    texts = generated_sentences(VERDICT["sentences"], VERDICT["seed"])
    fits: dict[str, list[tuple[float, float]]] = {}
    fit_seconds = 0.0
    for rung in plain:  # one rung at a time: its fitted layers, then the whole model scored
        fitted, fits[rung.name] = {}, []
        for layer, inputs in layer_input_stream(model, texts):
            original = model.scratch_layer(layer)
            fit = uptrain(original, rung.module(original), inputs, steps, seed=VERDICT["seed"])
            fitted[layer] = fit.module
            fits[rung.name].append((fit.before, fit.after))
            fit_seconds += fit.seconds
            tick(max(1, steps // 100))
            del inputs
        entries.append(Entry(UPTRAINED, rung.name, rung.pooling, _values(model, replace=fitted)))
        tick()
    tokens_per_layer = sum(len(model.tokenizer(t)["input_ids"]) for t in texts) / len(texts) * UPTRAIN_BATCH * steps
    budget = {
        "steps": steps,
        "batch": UPTRAIN_BATCH,
        "sentences": len(texts),
        "tokens_per_layer": int(round(tokens_per_layer)),
        "fit_seconds": round(fit_seconds, 1),
    }
    return Verdict(model.name, model.traits.task, gold, tokens, entries, alone, fits, budget, time.perf_counter() - t0)


# ---------------------------------------------------------------- the verdicts shipped with the package


def verdict_file(name: str) -> str:
    """The package's file of a model's verdict (written by scripts/sharing_verdict.py)."""
    return f"data/verdict_{name}.json"


def verdict_stamp(model: LoadedModel) -> dict:
    """What a stored verdict must have been computed on: the model's name and weights, the held-out
    data, the sentences it was uptrained on, and the settings."""
    digest = hashlib.sha256(resources.files("mha").joinpath(similarity.STS_FILE).read_bytes())
    digest.update("\n".join(generated_sentences(VERDICT["sentences"], VERDICT["seed"])).encode())
    return {"version": VERSION, "model": model.name, "weights": model.digest, "data": digest.hexdigest(), **VERDICT}


def _change(c: Change) -> list[float]:
    return [c.change, c.low, c.high]


def verdict_to_json(v: Verdict, stamp: dict) -> str:
    """The verdict as JSON, with the stamp it was computed under (values to 7 significant digits)."""
    body = {
        "stamp": stamp,
        "task": v.task,
        "gold": None if v.gold is None else v.gold.tolist(),
        "tokens": None if v.tokens is None else v.tokens.tolist(),
        "entries": [
            {"kind": e.kind, "rung": e.rung, "pooling": e.pooling, "values": [float(f"{x:.7g}") for x in e.values]}
            for e in v.entries
        ],
        "alone": [
            {
                "layer": a.layer,
                "removed": a.removed,
                "removed_change": _change(a.removed_change),
                "rungs": [
                    {
                        "rung": r.rung,
                        "pooling": r.pooling,
                        "score": r.score,
                        "model": _change(r.vs_model),
                        "removed": _change(r.vs_removed),
                    }
                    for r in a.rungs
                ],
            }
            for a in v.alone
        ],
        "fits": v.fits,
        "budget": v.budget,
        "seconds": round(v.seconds, 1),
        "level": v.level,
    }
    return json.dumps(body, indent=None, separators=(",", ":"))


def verdict_from_json(text: str, name: str) -> tuple[Verdict, dict]:
    """(the verdict, the stamp it was computed under) from verdict_to_json's text."""
    b = json.loads(text)
    entries = [Entry(e["kind"], e["rung"], e["pooling"], np.array(e["values"], dtype=np.float64)) for e in b["entries"]]
    alone = [
        LayerAlone(
            int(a["layer"]),
            float(a["removed"]),
            Change(*a["removed_change"]),
            tuple(
                Alone(r["rung"], r["pooling"], float(r["score"]), Change(*r["model"]), Change(*r["removed"]))
                for r in a["rungs"]
            ),
        )
        for a in b["alone"]
    ]
    gold = None if b["gold"] is None else np.array(b["gold"], dtype=np.float64)
    tokens = None if b["tokens"] is None else np.array(b["tokens"], dtype=np.int64)
    fits = {k: [tuple(p) for p in v] for k, v in b["fits"].items()}
    v = Verdict(name, b["task"], gold, tokens, entries, alone, fits, b["budget"], b["seconds"], b["level"], "shipped")
    return v, b["stamp"]


def shipped_verdict(model: LoadedModel) -> Verdict | None:
    """The verdict shipped with the package for this model, if it was computed on exactly these
    weights, this data and these settings (verdict_stamp); else None (compute it)."""
    path = resources.files("mha").joinpath(verdict_file(model.name))
    if not path.is_file():
        return None
    v, stamp = verdict_from_json(path.read_text(encoding="utf-8"), model.name)
    return v if stamp == verdict_stamp(model) else None


def yardstick_of(v: Verdict) -> Yardstick:
    """The yardstick of the verdict's task."""
    from mha.tasks import yardstick

    return yardstick.NEXT_TOKEN if v.task == "next-token" else yardstick.SIMILARITY
