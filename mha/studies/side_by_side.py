"""Three real models side by side: one with a K and V per head (BERT), one with K/V groups (SmolLM2)
and one with a single K/V head (Gemma 3), each measured beside its own baselines.

- Head diversity (mean Jensen-Shannon between two heads' maps, Clark et al. 2019) over the bundled
  pool of sentences, for every pair of heads, for the pairs that read one K/V head (within) and the
  pairs that read different ones (across), beside random maps exactly as sharp as the model's own
  (metrics.shuffled_diversity): the diversity heads of that sharpness would have by chance.
- K/V overlap: the mean cos^2 of the principal angles between two K/V heads' W^K (and W^V)
  subspaces, beside two random subspaces of the same size (d_k / d_model). A model with one K/V head
  has no two to compare: None.
- The task verdict (mha.studies.verdict): the model's score, every head removed, and the share of
  what attention adds that each converted rung keeps, converted and uptrained.

One model is resident at a time (ui/cache.py), so scripts/side_by_side.py measures the three in
turn and writes data/side_by_side.json; the page reads that file.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np

from mha.analyses import groups, ladder, metrics

if TYPE_CHECKING:
    from mha.models.family import LoadedModel
    from mha.models.run import Run
    from mha.studies.verdict import Verdict

FILE = "data/side_by_side.json"
SEEDS = 2  # shuffles per map for the random-maps baseline


@dataclass(frozen=True)
class Kept:
    """One converted rung of the verdict: the share of what attention adds that it keeps."""

    rung: str
    converted: float
    uptrained: float | None


@dataclass(frozen=True)
class ModelRow:
    """One model's measures (module doc); None where its structure has no such pair."""

    name: str
    who: str
    n_layers: int
    n_heads: int
    kv_heads: int
    d_head: int
    d_model: int
    texts: int
    diversity: float
    within: float | None
    across: float | None
    random_maps: float
    k_overlap: float | None
    v_overlap: float | None
    random_overlap: float
    score_name: str
    model_score: float
    removed_score: float
    kept: list[Kept]

    @property
    def structure(self) -> str:
        """MHA, GQA-G or MQA."""
        H, G = self.n_heads, self.kv_heads
        return "MHA" if G == H else "MQA" if G == 1 else f"GQA-{G}"


def _pair_means(d: np.ndarray, group: np.ndarray) -> tuple[float, float | None, float | None]:
    """(all pairs, same-group pairs or None, cross-group pairs or None) of an (H, H) divergence."""
    i, j = np.triu_indices(len(group), 1)
    same = group[i] == group[j]
    values = d[i, j]
    return (
        float(values.mean()),
        float(values[same].mean()) if same.any() else None,
        float(values[~same].mean()) if (~same).any() else None,
    )


def kv_overlap(model: LoadedModel, role: str) -> float | None:
    """Mean over layers and pairs of K/V heads of their W^K (role "k") or W^V ("v") overlap."""
    G = model.traits.kv_groups
    if G < 2:
        return None
    per_layer = []
    for layer in range(model.n_layers):
        w = getattr(model.scratch_layer(layer), f"{role}_proj").weight.detach().numpy()  # (G * D, C)
        per_layer.append(metrics.mean_off_diagonal(metrics.subspace_overlap(w, G)))
    return float(np.mean(per_layer))


def measure(model: LoadedModel, runs: list[Run], verdict: Verdict) -> ModelRow:
    """The module doc's measures of `model` on `runs` (the pool's sentences) and its verdict."""
    from mha.studies.verdict import CONVERTED, UPTRAINED

    t = model.traits
    H, G = model.n_heads, t.kv_groups
    group = np.arange(H) // (H // G)  # the K/V head each query head reads
    per_text = [groups.layer_diversity(r.attentions, t.causal) for r in runs]  # each (L, H, H)
    alls, withins, acrosses = zip(*(_pair_means(d, group) for d in np.mean(per_text, axis=0)))
    random_maps = np.mean(
        [
            metrics.shuffled_diversity(r.attentions[layer], t.causal, SEEDS, t.window(layer))
            for r in runs
            for layer in range(t.n_layers)
        ]
    )
    plain = ladder.rungs(H, False, G)[0].pooling  # the plain mean's name (Rung.pooling)
    model_score, removed = verdict.score(verdict.model_entry), verdict.score(verdict.removed_entry)
    kept = []
    for e in verdict.entries:
        if e.kind == CONVERTED and e.pooling == plain:
            up = verdict.find(UPTRAINED, e.rung, plain)
            kept.append(Kept(e.rung, verdict.kept(e), None if up is None else verdict.kept(up)))
    return ModelRow(
        name=model.name,
        who=t.who,
        n_layers=t.n_layers,
        n_heads=H,
        kv_heads=G,
        d_head=t.d_head,
        d_model=model.d_model,
        texts=len(runs),
        diversity=float(np.mean(alls)),
        within=None if withins[0] is None else float(np.mean(withins)),
        across=None if acrosses[0] is None else float(np.mean(acrosses)),
        random_maps=float(random_maps),
        k_overlap=kv_overlap(model, "k"),
        v_overlap=kv_overlap(model, "v"),
        random_overlap=metrics.random_overlap(t.d_head, model.d_model),
        score_name="Spearman (STS dev)" if verdict.task == "similarity" else "loss (nats)",
        model_score=model_score,
        removed_score=removed,
        kept=kept,
    )


def to_json(rows: list[ModelRow]) -> str:
    return json.dumps([asdict(r) for r in rows], indent=1)


def from_json(text: str) -> list[ModelRow]:
    return [ModelRow(**{**r, "kept": [Kept(**k) for k in r["kept"]]}) for r in json.loads(text)]


def shipped() -> list[ModelRow]:
    """The rows scripts/side_by_side.py wrote ([] if it has not run)."""
    path = resources.files("mha").joinpath(FILE)
    return from_json(path.read_text(encoding="utf-8")) if path.is_file() else []
