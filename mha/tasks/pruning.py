"""The "Do we need every head?" study: what each head is worth on the model's own task (Traits.task),
and how many heads can go, least important first, with the noise said beside every count.

On sentence similarity (mha/tasks/similarity.py, HeadsStudy):

- The heads are ranked on human-graded pairs, the STS Benchmark's train split (genre images;
  Cer et al. 2017), and every curve that counts is scored on pairs the ranking never saw: the
  benchmark's dev split (images and track5.en-en) and, as a second, labelled set, the pairs
  written for this project. The benchmark's test split is not shipped and never used.
- Each held-out count comes with a bootstrap interval over the scoring pairs (the change in
  Spearman at every point of the curve, resampled pairs, the same resample for the full and the
  pruned model) and beside the spread of random orders; the floor (every head removed) is
  measured the same way.
- The bundled model's study ships with the package (data/heads_study.json,
  scripts/heads_study.py), used only for the exact weights, pairs and settings it was computed on.

On next-token loss (mha/tasks/next_token.py, LossStudy): the heads are ranked by Michel et al.'s
gradient importance on the ranking texts (STS train sentences) and every count is scored on texts
the ranking never saw (STS dev sentences), with a bootstrap interval of the change in loss, beside
seeded random orders and the floor (every head removed).

Michel et al. 2019, "Are Sixteen Heads Really Better than One?"; Voita et al. 2019.
Shapes: P pairs, B bootstrap resamples, L layers, H heads.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np
import torch
from scipy.stats import spearmanr

from mha.tasks import next_token
from mha.tasks.similarity import (
    GROUP,
    STS_FILE,
    TOLERANCE,
    Ablations,
    Importance,
    Pair,
    PruningCurve,
    bootstrap_change,
    curve_cosines,
    curve_on,
    head_mask,
    importance_and_ablations,
    order_by,
    random_order,
    similarity_pairs,
    sts_pairs,
)

if TYPE_CHECKING:
    from mha.models.family import LoadedModel
    from mha.models.run import Run


@dataclass
class HeldOut:
    """A pruning curve scored on pairs the ranking never saw, with the bootstrap interval (low,
    high) of its change from the full model at every point."""

    name: str
    n_pairs: int
    curve: PruningCurve
    low: list[float]
    high: list[float]
    strict: list[int]  # surely_can_go under each bootstrap seed 0 .. STRICT_SEEDS - 1 (seed 0 draws low, high)

    def can_go(self, tolerance: float = TOLERANCE) -> int:
        """Heads that can go (point estimate) before Spearman drops by more than tolerance."""
        return self.curve.can_go(tolerance)

    def surely_can_go(self, tolerance: float = TOLERANCE) -> int:
        """Heads that can go while the whole interval of the change stays above -tolerance (in
        order, at the curve's points; 0 if the first removal already leaves it), under seed 0."""
        return first_out(self.curve.removed, [-low for low in self.low], tolerance)

    def change_at(self, n: int) -> tuple[float, float, float]:
        """(change, low, high) at the point where n heads are removed."""
        k = self.curve.removed.index(n)
        return self.curve.spearman[k] - self.curve.spearman[0], self.low[k], self.high[k]


@dataclass
class HeadsStudy:
    """Everything the "Do we need every head?" page shows about the model (not the sentence).

    importance: both measures on the ranking pairs (STS train).
    held_out: the heads removed least important first (by signed drop on the ranking pairs),
        scored on the STS dev pairs and on the written pairs, each with its bootstrap interval.
    in_sample: the same order scored on the ranking pairs themselves (optimistic, for comparison).
    random: one curve per seeded random order, scored on the STS dev pairs.
    halves_agreement: Spearman between the heads' drops measured on two random halves of the ranking
        pairs, one value per halving.
    origin: "computed" here, or "shipped" (data/heads_study.json, see shipped_study).
    """

    importance: Importance
    held_out: list[HeldOut]
    in_sample: PruningCurve
    random: list[PruningCurve]
    seeds: tuple[int, ...]
    halves_agreement: list[float]
    n_rank: int
    tolerance: float = TOLERANCE
    origin: str = "computed"
    level: float = 0.9

    def random_can_go(self) -> list[int]:
        """Every random order: heads that can go before Spearman drops by tolerance."""
        return [c.can_go(self.tolerance) for c in self.random]

    @property
    def main(self) -> HeldOut:
        """The held-out curve on the benchmark's dev pairs."""
        return self.held_out[0]


def first_out(removed: Sequence[int], bound: Sequence[float], tolerance: float) -> int:
    """The last count of `removed` (in order) before the first point whose `bound` exceeds
    `tolerance` (0 if the first point already does): the strict count of a curve."""
    can = 0
    for n, b in zip(removed, bound):
        if b > tolerance:
            break
        can = n
    return can


STRICT_SEEDS = 100  # bootstrap seeds a strict count is recomputed under: it is said only as stable as they make it


def seed_spread(counts: Sequence[int]) -> list[tuple[int, int]]:
    """(count, seeds giving it) for every count in `counts` (one per bootstrap seed), most seeds first."""
    values, seeds = np.unique(np.asarray(counts), return_counts=True)
    return sorted(((int(v), int(k)) for v, k in zip(values, seeds)), key=lambda vk: (-vk[1], -vk[0]))


def _steps(n: int, step: int) -> list[int]:
    """0, step, 2 step, ... and n itself."""
    steps = list(range(0, n + 1, step))
    return steps if steps[-1] == n else [*steps, n]


STUDY = {
    "step": 6,
    "seeds": (0, 1, 2, 3, 4, 5, 6, 7),
    "random_step": 6,
    "resamples": 1000,
    "level": 0.9,
    "strict_seeds": STRICT_SEEDS,
}
# random orders at the ranked curve's resolution: a count compared with theirs is on the same grid
HALVINGS = 20  # random halvings of the ranking pairs for halves_agreement
STUDY_VERSION = 4  # raise when heads_study computes something else: a shipped study is then not used
SCORED_ON = {"dev": "STS Benchmark dev (images, track5.en-en)", "written": "pairs written for this project"}


def scoring_sets() -> dict[str, list[Pair]]:
    """The held-out sets a study scores its curves on, by name (SCORED_ON says what they are)."""
    return {"dev": sts_pairs("dev"), "written": similarity_pairs()}


def heads_study(
    bert: LoadedModel,
    step: int = STUDY["step"],
    seeds: tuple[int, ...] = STUDY["seeds"],
    random_step: int = STUDY["random_step"],
    resamples: int = STUDY["resamples"],
    level: float = STUDY["level"],
    rank_pairs: list[Pair] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> HeadsStudy:
    """Importance on the ranking pairs (default: STS train), the heads removed in order of their
    signed drop there, every `step` heads, scored on every scoring set (held out, with bootstrap
    intervals) and on the ranking pairs (in sample); random orders (one per seed), every
    `random_step` heads, on the dev pairs. progress(done, total) counts model runs."""
    rank = sts_pairs("train") if rank_pairs is None else rank_pairs
    sets = scoring_sets()
    L, H = bert.n_layers, bert.n_heads
    steps, random_steps = _steps(L * H, step), _steps(L * H, random_step)
    first = -(-len(rank) // GROUP) + 1 + L * H  # importance_and_ablations' model runs
    total = first + (len(steps) - 1) * (1 + len(sets)) + len(sets) + len(seeds) * (len(random_steps) - 2)
    done = [0]

    def report(n: int) -> None:
        done[0] = n
        if progress is not None:
            progress(n, total)

    def run(order: list[tuple[int, int]], at: list[int], pairs: list[Pair], known=None) -> np.ndarray:
        start = done[0]
        out = curve_cosines(bert, order, at, pairs, lambda n, _t: report(start + n), known)
        report(start + len([n for n in at if n not in (known or {})]))
        return out

    importance, ablations = importance_and_ablations(bert, rank, lambda n, _t: report(n))
    order = order_by(ablations.drop())
    in_sample = curve_on(steps, run(order, steps, rank, {0: ablations.base}), ablations.gold)
    held, dev_known = [], {}
    for name, pairs in sets.items():
        gold = np.array([g for *_, g in pairs], dtype=np.float64)
        cos = run(order, steps, pairs)  # (len(steps), P): 0 and every head removed included
        if name == "dev":
            dev_known = {0: cos[0], L * H: cos[-1]}
            dev_gold = gold
        intervals = [bootstrap_change(cos, gold, resamples, level, seed) for seed in range(STUDY["strict_seeds"])]
        low, high = intervals[0]  # seed 0's interval is the one drawn; every seed's gives a strict count
        strict = [first_out(steps, -lows, TOLERANCE) for lows, _ in intervals]
        held.append(HeldOut(name, len(pairs), curve_on(steps, cos, gold), low.tolist(), high.tolist(), strict))
    rand = [
        curve_on(random_steps, run(random_order(L, H, s), random_steps, sets["dev"], dev_known), dev_gold)
        for s in seeds
    ]
    agreement = halves_agreement(ablations)
    return HeadsStudy(importance, held, in_sample, rand, tuple(seeds), agreement, len(rank), level=level)


def halves_agreement(ablations: Ablations, splits: int = HALVINGS, seed: int = 0) -> list[float]:
    """Spearman between the heads' drops measured on two random halves of the pairs, for `splits`
    seeded halvings: how far one ranking of single heads carries to other pairs like these."""
    rng = np.random.default_rng(seed)
    P = ablations.gold.shape[0]
    out = []
    for _ in range(splits):
        perm = rng.permutation(P)
        a, b = np.sort(perm[: P // 2]), np.sort(perm[P // 2 :])
        out.append(float(spearmanr(ablations.drop(a).ravel(), ablations.drop(b).ravel()).statistic))
    return out


# ---------------------------------------------------------------- the study shipped with the package

STUDY_FILE = "data/heads_study.json"  # written by scripts/heads_study.py


def study_stamp(bert: LoadedModel) -> dict:
    """What a stored study must have been computed on: the model's name and weights, the pair
    files and the study's settings. A shipped study is used only where all of them are equal."""
    data = resources.files("mha")
    digest = hashlib.sha256()
    for name in (STS_FILE, "data/similarity_pairs.tsv"):
        digest.update(data.joinpath(name).read_bytes())
    return {
        "version": STUDY_VERSION,
        "model": bert.name,
        "weights": bert.digest,
        "pairs": digest.hexdigest(),
        "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in STUDY.items()},
        "tolerance": TOLERANCE,
    }


def _curve(c: PruningCurve) -> dict:
    return {"removed": c.removed, "spearman": c.spearman}


def _from(c: dict) -> PruningCurve:
    return PruningCurve([int(n) for n in c["removed"]], [float(v) for v in c["spearman"]])


def study_to_json(study: HeadsStudy, stamp: dict) -> str:
    """The study as JSON, with the stamp it was computed under."""
    imp = study.importance
    body = {
        "stamp": stamp,
        "importance": {"drop": imp.drop.tolist(), "gradient": imp.gradient.tolist(), "base": imp.base},
        "held_out": [
            {
                "name": h.name,
                "n_pairs": h.n_pairs,
                "curve": _curve(h.curve),
                "low": h.low,
                "high": h.high,
                "strict": h.strict,
            }
            for h in study.held_out
        ],
        "in_sample": _curve(study.in_sample),
        "random": [_curve(c) for c in study.random],
        "seeds": list(study.seeds),
        "halves_agreement": study.halves_agreement,
        "n_rank": study.n_rank,
        "level": study.level,
    }
    return json.dumps(body, indent=1)


def study_from_json(text: str) -> tuple[HeadsStudy, dict]:
    """(the study, the stamp it was computed under) from study_to_json's text."""
    body = json.loads(text)
    imp = body["importance"]
    study = HeadsStudy(
        Importance(np.array(imp["drop"]), np.array(imp["gradient"]), float(imp["base"])),
        [
            HeldOut(h["name"], int(h["n_pairs"]), _from(h["curve"]), h["low"], h["high"], [int(n) for n in h["strict"]])
            for h in body["held_out"]
        ],
        _from(body["in_sample"]),
        [_from(c) for c in body["random"]],
        tuple(body["seeds"]),
        [float(v) for v in body["halves_agreement"]],
        int(body["n_rank"]),
        float(body["stamp"]["tolerance"]),
        "shipped",
        float(body["level"]),
    )
    return study, body["stamp"]


def shipped_study(bert: LoadedModel) -> HeadsStudy | None:
    """The study shipped with the package for this model, if it was computed on exactly these
    weights, these pairs and these settings (study_stamp); else None (compute it)."""
    path = resources.files("mha").joinpath(STUDY_FILE)
    if not path.is_file():
        return None
    study, stamp = study_from_json(path.read_text(encoding="utf-8"))
    return study if stamp == study_stamp(bert) else None


def attentions_without(bert: LoadedModel, run: Run, removed: Sequence[tuple[int, int]]) -> np.ndarray:
    """Every head's attention (L, H, T, T) with the heads `removed` ((layer, head) pairs) taken out
    of the model: the others' maps as they are then, a removed head's map all zero. Nothing
    changes before the first layer with a removed head: those layers are the run's own maps (all
    of them, read-only, when nothing is removed) and the model runs from that layer on, from the
    run's states entering it."""
    if not removed:
        return run.attentions
    first = min(layer for layer, _ in removed)
    mask = head_mask(bert, removed)
    with torch.inference_mode():
        _, changed = bert.run_layers(
            run.layer_state(first), head_mask=torch.as_tensor(mask, dtype=torch.float32), start=first
        )
    out = np.empty_like(run.attentions)  # (L, H, T, T)
    out[:first] = run.attentions[:first]
    out[first:] = torch.cat(changed).float().numpy() * mask[first:, :, None, None]  # (L - first, H, T, T)
    return out


LOSS_TOLERANCE = 0.05  # nats per token a pruning may add to the loss and still count as "can go" (perplexity +5 %)
LOSS_STUDY = {"step": 27, "seeds": (0, 1, 2), "level": 0.9}  # heads removed between two points; random orders; interval


@dataclass
class LossStudy:
    """gradient (L, H): the importance on the ranking texts; removed: the counts of each point;
    loss: the held-out loss there; low, high: the interval of its change from the full model;
    random: one loss curve per seed; n_rank, n_score: texts ranked and scored on."""

    gradient: np.ndarray
    removed: list[int]
    loss: list[float]
    low: list[float]
    high: list[float]
    random: list[list[float]]
    seeds: tuple[int, ...]
    n_rank: int
    n_score: int
    strict: list[int]  # surely_can_go under each bootstrap seed 0 .. STRICT_SEEDS - 1 (seed 0 draws low, high)
    tolerance: float = LOSS_TOLERANCE
    level: float = 0.9

    def can_go(self, loss: list[float] | None = None) -> int:
        """Heads that can go (in order, at the points) before the loss first rises by more than tolerance."""
        loss = self.loss if loss is None else loss
        can = 0
        for n, value in zip(self.removed, loss):
            if value > loss[0] + self.tolerance:
                break
            can = n
        return can

    def surely_can_go(self) -> int:
        """The same while the whole interval of the change stays below +tolerance (bootstrap seed 0)."""
        return first_out(self.removed, self.high, self.tolerance)

    def random_can_go(self) -> list[int]:
        return [self.can_go(curve) for curve in self.random]

    @property
    def top(self) -> tuple[int, int]:
        """(layer, head) of the largest gradient importance."""
        layer, head = np.unravel_index(int(np.argmax(self.gradient)), self.gradient.shape)
        return int(layer), int(head)

    @property
    def tolerance_ratio(self) -> float:
        """What the tolerance does to the perplexity: exp(tolerance) - 1."""
        return float(np.expm1(self.tolerance))


def _loss_scores(
    model: LoadedModel, order: list[tuple[int, int]], at: list[int], known: dict
) -> list[next_token.LossScore]:
    """The score set's loss with the first n heads of `order` removed, for n in `at`."""
    out = []
    for n in at:
        if n not in known:
            mask = np.ones((model.n_layers, model.n_heads))
            for layer, head in order[:n]:
                mask[layer, head] = 0.0
            known[n] = (
                next_token.evaluate(model, next_token.texts(), head_mask=mask) if n else next_token.evaluate(model)
            )
        out.append(known[n])
    return out


def loss_strict(
    at: list[int], scores: list[next_token.LossScore], tolerance: float, level: float, seeds: int = STRICT_SEEDS
) -> list[int]:
    """The strict count (the whole interval of the loss's change below +tolerance) of the curve
    `scores` (one per count in `at`, the first the full model) under bootstrap seeds 0 .. seeds - 1."""
    return [
        first_out(at, [next_token.paired_interval(scores[0], s, level, seed=seed)[2] for s in scores], tolerance)
        for seed in range(seeds)
    ]


def loss_study(model: LoadedModel, progress: Callable[[int, int], None] | None = None) -> LossStudy:
    """The study on a next-token model's own task: rank on next_token.texts("rank") by gradient
    importance, remove least important first every LOSS_STUDY["step"] heads, score on
    next_token.texts("score") with bootstrap intervals, beside random orders."""
    STEP, SEEDS, LEVEL = LOSS_STUDY["step"], LOSS_STUDY["seeds"], LOSS_STUDY["level"]
    rank = list(next_token.texts("rank"))
    L, H = model.n_layers, model.n_heads
    at = sorted({*range(0, L * H + 1, STEP), L * H})
    total = len(rank) + len(at) + len(SEEDS) * (len(at) - 2)
    done = [0]

    def tick(n: int = 1) -> None:
        done[0] += n
        if progress is not None:
            progress(done[0], total)

    gradient = next_token.gradient_importance(model, rank, lambda n, _t: progress(n, total) if progress else None)
    done[0] = len(rank)
    order = [(int(i // H), int(i % H)) for i in np.argsort(gradient, axis=None, kind="stable")]
    shared: dict = {}
    scores = []
    for n in at:
        scores += _loss_scores(model, order, [n], shared)
        tick()
    ends = {0: shared[0], L * H: shared[L * H]}  # the same for any order
    intervals = [next_token.paired_interval(scores[0], s, LEVEL) for s in scores]
    strict = loss_strict(at, scores, LOSS_TOLERANCE, LEVEL)
    random = []
    for seed in SEEDS:
        perm = np.random.default_rng(seed).permutation(L * H)
        known = dict(ends)
        curve = []
        for n in at:
            curve.append(_loss_scores(model, [(int(i // H), int(i % H)) for i in perm], [n], known)[0].loss)
            if n not in ends:
                tick()
        random.append(curve)
    return LossStudy(
        gradient,
        at,
        [s.loss for s in scores],
        [lo for _, lo, _ in intervals],
        [hi for _, _, hi in intervals],
        random,
        SEEDS,
        len(rank),
        len(next_token.texts()),
        strict,
        level=LEVEL,
    )
