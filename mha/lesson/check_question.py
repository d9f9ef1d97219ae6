"""The check question's answer in numbers: one computation for every page that gives it.

The lesson's check question: give every head the same W^Q, W^K, W^V to save parameters; what do
the heads do? `answer` reads two rows of collapse measures (LayerCollapse.summary()), BERT's own heads
(alpha = 0) and the shared structure (alpha = 1), and the parameter counts of the structure with
`path.roles` shared. The collapse page, the lesson's step 6 and its recap all read this one Answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mha.analyses.collapse import SAME_WEIGHTS, CollapsePath, Source
from mha.core.attention import ROLES


@dataclass(frozen=True)
class Answer:
    """BERT's heads (`*_bert`) against the shared structure (`*_shared`) on one layer and sentence.

    bert, shared: every measure of LayerCollapse.summary() at alpha = 0 and at alpha = 1 (the
    named fields below are read from them).
    """

    roles: tuple[str, ...]
    source: Source
    n_heads: int
    bert: Mapping[str, float]
    shared: Mapping[str, float]
    params_distinct: int
    params_shared: int  # of the structure with `roles` shared

    def _both(self, key: str) -> tuple[float, float]:
        return self.bert[key], self.shared[key]

    diversity_bert = property(lambda self: self.bert["head diversity (JS)"])
    diversity_shared = property(lambda self: self.shared["head diversity (JS)"])
    heads_bert = property(lambda self: self.bert["effective number of heads"])  # metrics.effective_heads
    heads_shared = property(lambda self: self.shared["effective number of heads"])
    maps_bert = property(lambda self: int(self.bert["distinct maps"]))
    maps_shared = property(lambda self: int(self.shared["distinct maps"]))
    spread_bert = property(lambda self: self.bert["score spread"])  # mean of metrics.score_spread
    spread_shared = property(lambda self: self.shared["score spread"])
    entropy_bert = property(lambda self: self.bert["entropy / ln T"])  # 1 = uniform
    entropy_shared = property(lambda self: self.shared["entropy / ln T"])
    difference_bert = property(lambda self: self.bert["largest difference between heads"])  # metrics.head_spread
    difference_shared = property(lambda self: self.shared["largest difference between heads"])

    @property
    def overlap_bert(self) -> dict[str, float]:
        """The subspace overlap of each shared role's projections in BERT's heads."""
        return {r: self.bert[f"subspace overlap W^{r.upper()}"] for r in self.roles}

    @property
    def overlap_shared(self) -> dict[str, float]:
        return {r: self.shared[f"subspace overlap W^{r.upper()}"] for r in self.roles}

    @property
    def same_attention(self) -> bool:
        """W^Q and W^K shared: every head computes the same attention, by structure."""
        return {"q", "k"} <= set(self.roles) and self.n_heads > 1

    @property
    def identical(self) -> bool:
        """Measured: no two heads' attention weights differ by SAME_WEIGHTS or more."""
        return self.difference_shared < SAME_WEIGHTS

    @property
    def one_head(self) -> bool:
        """Q, K and V all shared: the layer is one head computed H times."""
        return set(self.roles) == set(ROLES)

    @property
    def flat(self) -> bool:
        """The shared map is much flatter than BERT's heads: less than half their score spread."""
        return self.spread_shared < 0.5 * self.spread_bert

    @property
    def params_saved(self) -> int:
        return self.params_distinct - self.params_shared

    def table(self) -> list[tuple[str, float, float]]:
        """Every measure as (name, BERT's heads, shared), the parameters last."""
        rows = [(k, *self._both(k)) for k in self.bert if k not in ("alpha", "parameters")]
        return rows + [("parameters", float(self.params_distinct), float(self.params_shared))]


def answer(
    bert: Mapping[str, float], shared: Mapping[str, float], d_model: int, n_heads: int, path: CollapsePath
) -> Answer:
    """The answer from the measures at alpha = 0 (`bert`) and alpha = 1 (`shared`) on path's
    source and roles, with the parameters each of the two modules has."""
    if not (bert["alpha"] == 0.0 and shared["alpha"] == 1.0):
        raise ValueError("the answer needs the path's two ends, alpha = 0 and alpha = 1")
    return Answer(
        roles=path.roles,
        source=path.source,
        n_heads=n_heads,
        bert=dict(bert),
        shared=dict(shared),
        params_distinct=int(bert["parameters"]),  # the modules' own counts: the model's structure (bias or not,
        params_shared=int(shared["parameters"]),  # K/V groups) at alpha = 0, the shared one at alpha = 1
    )
