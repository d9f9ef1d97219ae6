"""The "Do we need every head?" study: what each head is worth on the bundled pairs, and how many
heads can go, least important first, ranked on one part of the pairs and scored on another (held
out), beside the curves ranked and scored on the same part (in sample) and random orders. The
bundled model's study ships with the package (data/heads_study.json, scripts/heads_study.py),
used only for the exact weights, pairs and settings it was computed on.

- Michel et al. 2019, "Are Sixteen Heads Really Better than One?"; Voita et al. 2019.
Shapes: P pairs, L layers, H heads.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np
from scipy.stats import spearmanr

from .task import (
    GROUP,
    TOLERANCE,
    Importance,
    PruningCurve,
    curve_cosines,
    curve_on,
    importance_and_ablations,
    order_by,
    pair_kinds,
    random_order,
    similarity_pairs,
)

if TYPE_CHECKING:
    from .bert import LoadedBert


def pair_folds(n_folds: int = 2, seed: int = 0) -> list[np.ndarray]:
    """The bundled pairs' indices in n_folds parts of (nearly) equal size: the pairs of each kind
    shuffled with `seed` and dealt in turn, so every part has every kind."""
    kinds = pair_kinds()
    rng = np.random.default_rng(seed)
    folds: list[list[int]] = [[] for _ in range(n_folds)]
    dealt = 0
    for kind in sorted(set(kinds)):
        for i in rng.permutation([i for i, k in enumerate(kinds) if k == kind]):
            folds[dealt % n_folds].append(int(i))
            dealt += 1
    return [np.sort(np.array(f, dtype=int)) for f in folds]


@dataclass
class Fold:
    """One part of the pairs and the pruning curves scored on it.

    pairs: the indices scored on. drop: (L, H) measured on these pairs alone.
    held_out: heads ranked (by drop) on the OTHER pairs, scored here: the honest curve.
    in_sample: heads ranked on these same pairs, scored here: optimistic, for comparison.
    random: one curve per seeded random order, scored here.
    """

    pairs: np.ndarray
    drop: np.ndarray
    held_out: PruningCurve
    in_sample: PruningCurve
    random: list[PruningCurve]


@dataclass
class HeadsStudy:
    """Everything the "Do we need every head?" page shows about the model (not the sentence):
    importance both ways on every pair, and pruning curves least-important-first (by signed drop)
    ranked on one part of the pairs and scored on another, beside in-sample and random ones.
    origin: "computed" here, or "shipped" (data/heads_study.json, see shipped_study)."""

    importance: Importance
    folds: list[Fold]
    seeds: tuple[int, ...]
    tolerance: float = TOLERANCE
    origin: str = "computed"

    def held_out_can_go(self) -> list[int]:
        """Per fold: heads that can go, ranked on the other pairs, before Spearman drops by tolerance."""
        return [f.held_out.can_go(self.tolerance) for f in self.folds]

    def in_sample_can_go(self) -> list[int]:
        return [f.in_sample.can_go(self.tolerance) for f in self.folds]

    def random_can_go(self) -> list[int]:
        """Every fold and seed: heads that can go in a random order."""
        return [c.can_go(self.tolerance) for f in self.folds for c in f.random]

    def ranking_agreement(self) -> float:
        """Spearman's rho between the heads' drops measured on the first two folds: 1 = the
        pairs rank the heads alike whichever half is used; near 0 = the ranking is noise."""
        return float(spearmanr(self.folds[0].drop.ravel(), self.folds[1].drop.ravel()).statistic)


def _steps(n: int, step: int) -> list[int]:
    """0, step, 2 step, ... and n itself."""
    steps = list(range(0, n + 1, step))
    return steps if steps[-1] == n else [*steps, n]


STUDY = {"step": 6, "seeds": (0, 1, 2, 3), "random_step": 12, "n_folds": 2}  # heads_study's settings
STUDY_VERSION = 1  # raise when heads_study computes something else: a shipped study is then not used


def heads_study(
    bert: LoadedBert,
    step: int = STUDY["step"],
    seeds: tuple[int, ...] = STUDY["seeds"],
    random_step: int = STUDY["random_step"],
    n_folds: int = STUDY["n_folds"],
    progress: Callable[[int, int], None] | None = None,
) -> HeadsStudy:
    """Importance on every bundled pair, then for each of n_folds parts of the pairs: the heads
    ranked by drop (signed: heads whose removal raises the score first) on the other parts and
    scored on this one (held out), ranked and scored on this one (in sample), every `step` heads;
    and random orders (one per seed), every `random_step` heads. progress(done, total) counts
    model runs."""
    if n_folds < 2:
        raise ValueError(f"n_folds must be at least 2 (rank on one part, score on another), got {n_folds}")
    pairs = similarity_pairs()
    L, H = bert.n_layers, bert.n_heads
    steps, random_steps = _steps(L * H, step), _steps(L * H, random_step)
    folds = pair_folds(n_folds)
    rest = [np.setdiff1d(np.arange(len(pairs)), f) for f in folds]
    # with two folds, the rest of one fold is the other fold: one ranking serves both curves
    n_rankings = n_folds if n_folds == 2 else 2 * n_folds
    first = -(-len(pairs) // GROUP) + 1 + L * H  # _importance's model runs
    total = first + 1 + n_rankings * (len(steps) - 2) + len(seeds) * (len(random_steps) - 2)
    done = [0]

    def report(n: int) -> None:
        done[0] = n
        if progress is not None:
            progress(n, total)

    def run(order: list[tuple[int, int]], at: list[int]) -> np.ndarray:
        start = done[0]
        return curve_cosines(bert, order, at, pairs, lambda n, _t: report(start + n), known)

    importance, ablations = importance_and_ablations(bert, pairs, lambda n, _t: report(n))
    known = {0: ablations.base}  # no head removed, and every head removed: the same in any order
    known[L * H] = curve_cosines(bert, [(l, h) for l in range(L) for h in range(H)], [L * H], pairs)[0]
    report(first + 1)
    ranked: dict[tuple[int, ...], np.ndarray] = {}
    for idx in [*rest, *folds]:
        if tuple(idx) not in ranked:
            ranked[tuple(idx)] = run(order_by(ablations.drop(idx)), steps)
    rand = [run(random_order(L, H, seed), random_steps) for seed in seeds]
    gold = ablations.gold
    return HeadsStudy(
        importance,
        [
            Fold(
                folds[f],
                ablations.drop(folds[f]),
                curve_on(steps, ranked[tuple(rest[f])], gold, folds[f]),
                curve_on(steps, ranked[tuple(folds[f])], gold, folds[f]),
                [curve_on(random_steps, c, gold, folds[f]) for c in rand],
            )
            for f in range(n_folds)
        ],
        tuple(seeds),
    )


# ---------------------------------------------------------------- the study shipped with the package

STUDY_FILE = "data/heads_study.json"  # written by scripts/heads_study.py


def study_stamp(bert: LoadedBert) -> dict:
    """What a stored study must have been computed on: the model's name and weights, the pairs
    file and the study's settings. A shipped study is used only where all of them are equal."""
    pairs = resources.files("mha").joinpath("data/similarity_pairs.tsv").read_bytes()
    return {
        "version": STUDY_VERSION,
        "model": bert.name,
        "weights": bert.digest,
        "pairs": hashlib.sha256(pairs).hexdigest(),
        "folds": [f.tolist() for f in pair_folds(STUDY["n_folds"])],
        "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in STUDY.items()},
        "tolerance": TOLERANCE,
    }


def _curve(c: PruningCurve) -> dict:
    return {"removed": c.removed, "spearman": c.spearman}


def study_to_json(study: HeadsStudy, stamp: dict) -> str:
    """The study as JSON, with the stamp it was computed under."""
    imp = study.importance
    body = {
        "stamp": stamp,
        "importance": {"drop": imp.drop.tolist(), "gradient": imp.gradient.tolist(), "base": imp.base},
        "seeds": list(study.seeds),
        "folds": [
            {
                "pairs": f.pairs.tolist(),
                "drop": f.drop.tolist(),
                "held_out": _curve(f.held_out),
                "in_sample": _curve(f.in_sample),
                "random": [_curve(c) for c in f.random],
            }
            for f in study.folds
        ],
    }
    return json.dumps(body, indent=1)


def study_from_json(text: str) -> tuple[HeadsStudy, dict]:
    """(the study, the stamp it was computed under) from study_to_json's text."""
    body = json.loads(text)
    imp = body["importance"]

    def curve(c: dict) -> PruningCurve:
        return PruningCurve([int(n) for n in c["removed"]], [float(v) for v in c["spearman"]])

    folds = [
        Fold(
            np.array(f["pairs"], dtype=int),
            np.array(f["drop"]),
            curve(f["held_out"]),
            curve(f["in_sample"]),
            [curve(c) for c in f["random"]],
        )
        for f in body["folds"]
    ]
    study = HeadsStudy(
        Importance(np.array(imp["drop"]), np.array(imp["gradient"]), float(imp["base"])),
        folds,
        tuple(body["seeds"]),
        float(body["stamp"]["tolerance"]),
        "shipped",
    )
    return study, body["stamp"]


def shipped_study(bert: LoadedBert) -> HeadsStudy | None:
    """The study shipped with the package for this model, if it was computed on exactly these
    weights, these pairs and these settings (study_stamp); else None (compute it)."""
    path = resources.files("mha").joinpath(STUDY_FILE)
    if not path.is_file():
        return None
    study, stamp = study_from_json(path.read_text(encoding="utf-8"))
    return study if stamp == study_stamp(bert) else None
