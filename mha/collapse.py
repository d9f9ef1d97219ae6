"""The lesson's check question, on real weights: give every head the same Q/K/V projection.

Everything here builds NEW modules from copies of the weights; the source module (and the
cached BERT it came from) is never modified.

- `shared_module(m, source)`: a projection="shared" module whose one W^Q, W^K, W^V (C x D) is
  head `source`'s slice of m's projections (or the mean of all heads' slices); W^O is kept.
- `interpolate(m, alpha, ...)`: the continuous path W_i(alpha) = (1 - alpha) W_i + alpha W_shared
  for every head i, as a distinct-mode module (alpha = 0: m itself, alpha = 1: all heads equal).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch

from . import metrics
from .attention import MultiHeadAttention

if TYPE_CHECKING:
    from .bert import BertRun, LoadedBert

Source = int | Literal["mean"]
ROLES = ("q", "k", "v")


def _head_slices(w: torch.Tensor, H: int) -> torch.Tensor:
    """(C_out, ...) weight or bias of a distinct projection -> (H, D, ...) per-head slices."""
    return w.reshape(H, w.shape[0] // H, *w.shape[1:])  # (H, D, C) or (H, D)


def shared_slice(w: torch.Tensor, H: int, source: Source = 0) -> torch.Tensor:
    """The one slice every head will use: head `source`'s rows, or the mean over heads."""
    slices = _head_slices(w, H)
    if source == "mean":
        return slices.mean(0)
    if not isinstance(source, int) or not 0 <= source < H:
        raise ValueError(f"source must be 'mean' or a head index in 0..{H - 1}, got {source!r}")
    return slices[source]


def _check(m: MultiHeadAttention) -> None:
    if m.projection != "distinct":
        raise ValueError("start from a module with distinct projections")


def shared_module(m: MultiHeadAttention, source: Source = 0) -> MultiHeadAttention:
    """A projection="shared" copy of m: every head uses one W^Q, W^K, W^V (C x D)."""
    _check(m)
    bias = m.q_proj.bias is not None
    with torch.inference_mode(False), torch.no_grad():  # ordinary tensors, no autograd
        s = MultiHeadAttention(m.d_model, m.n_heads, "shared", bias=bias)
        for role in ROLES:
            src, dst = getattr(m, f"{role}_proj"), getattr(s, f"{role}_proj")
            dst.weight.copy_(shared_slice(src.weight, m.n_heads, source))
            if bias:
                dst.bias.copy_(shared_slice(src.bias, m.n_heads, source))
        s.out_proj.load_state_dict(m.out_proj.state_dict())
    return s.eval().requires_grad_(False)


def interpolate(
    m: MultiHeadAttention, alpha: float, source: Source = 0, roles: Iterable[str] = ROLES
) -> MultiHeadAttention:
    """A distinct-mode copy of m with W_i(alpha) = (1 - alpha) W_i + alpha W_shared for `roles`.

    roles: which projections are pulled together ("q", "k", "v"). Sharing only Q and K makes
    every head's attention pattern the same but leaves the values distinct.
    """
    _check(m)
    with torch.inference_mode(False):
        return _interpolate_in_place(copy.deepcopy(m), alpha, source, roles)


def _interpolate_in_place(
    m: MultiHeadAttention, alpha: float, source: Source, roles: Iterable[str]
) -> MultiHeadAttention:
    """interpolate() on m itself: only for a module the caller owns (a fresh copy)."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    roles = tuple(roles)
    if bad := [r for r in roles if r not in ROLES]:
        raise ValueError(f"roles must be among {ROLES}, got {bad}")
    H = m.n_heads
    with torch.inference_mode(False), torch.no_grad():  # ordinary tensors, no autograd
        for role in roles:
            proj = getattr(m, f"{role}_proj")
            for name in ("weight", "bias"):
                w = getattr(proj, name)
                if w is None:
                    continue
                per_head = _head_slices(w, H)  # (H, D, ...)
                target = shared_slice(w, H, source).expand_as(per_head)
                w.copy_(((1 - alpha) * per_head + alpha * target).reshape(w.shape))
    return m.eval().requires_grad_(False)


@dataclass
class LayerCollapse:
    """One BERT layer recomputed with heads pulled towards a shared projection.

    weights: (H, T, T) attention of every head on BERT's real input to the layer.
    concat: (T, C) the heads' outputs side by side (before W^O).
    diversity: (H, H) Jensen-Shannon divergence between heads (metrics.head_diversity).
    overlap: role -> (H, H) mean cos^2 of principal angles between heads' W slices.
    effective_rank: of concat; at most D = C / H when Q, K and V are all shared.
    """

    alpha: float
    weights: np.ndarray
    concat: np.ndarray
    diversity: np.ndarray
    overlap: dict[str, np.ndarray]
    effective_rank: float

    def summary(self) -> dict[str, float]:
        """The scalar measures: mean off-diagonal diversity and overlaps, effective rank."""
        out = {"alpha": self.alpha, "head diversity (JS)": metrics.mean_off_diagonal(self.diversity)}
        for role, m in self.overlap.items():
            out[f"subspace overlap W^{role.upper()}"] = metrics.mean_off_diagonal(m)
        out["effective rank"] = self.effective_rank
        return out


def collapse_layer(
    bert: LoadedBert,
    run: BertRun,
    layer: int,
    alpha: float,
    source: Source = 0,
    roles: Iterable[str] = ROLES,
    overlap_roles: Iterable[str] = ROLES,
) -> LayerCollapse:
    """Layer `layer` of BERT at position alpha on the path to shared projections, with all
    measures (subspace overlap for the projections in overlap_roles)."""
    m = _interpolate_in_place(bert.scratch_layer(layer), alpha, source, roles)  # our own copy
    x = run.layer_input(layer)  # (1, T, C)
    return measure(m, x, alpha, overlap_roles)


def measure(
    m: MultiHeadAttention, x: torch.Tensor, alpha: float = float("nan"), overlap_roles: Iterable[str] = ROLES
) -> LayerCollapse:
    """Run module m on x (1, T, C) and compute every collapse measure (any projection mode)."""
    with torch.inference_mode():
        tr = m.trace(x)
    return measures_from(m, tr.weights[0].numpy(), tr.concat[0].numpy(), alpha, overlap_roles)


def measures_from(
    m: MultiHeadAttention,
    weights: np.ndarray,
    concat: np.ndarray,
    alpha: float = float("nan"),
    overlap_roles: Iterable[str] = ROLES,
) -> LayerCollapse:
    """The measures of module m given its attention (H, T, T) and concatenated head outputs (T, C)."""
    H = m.n_heads
    overlap = {}
    for r in overlap_roles:
        w = getattr(m, f"{r}_proj").weight.detach().numpy()
        # a shared module stores one (D, C) slice for every head: identical subspaces
        overlap[r] = np.ones((H, H)) if m.projection == "shared" else metrics.subspace_overlap(w, H)
    return LayerCollapse(
        alpha, weights, concat, metrics.head_diversity(weights), overlap, metrics.effective_rank(concat)
    )


def alpha_sweep(
    bert: LoadedBert,
    run: BertRun,
    layer: int,
    source: Source = 0,
    roles: Iterable[str] = ROLES,
    steps: int = 11,
) -> list[dict[str, float]]:
    """The scalar measures at `steps` evenly spaced alphas from 0 (distinct) to 1 (shared).

    Subspace overlap is followed for W^Q only (W^K and W^V move the same way along the path);
    collapse_layer gives all three at one alpha.
    """
    roles = tuple(roles)
    return [
        collapse_layer(bert, run, layer, float(a), source, roles, overlap_roles=("q",)).summary()
        for a in np.linspace(0.0, 1.0, steps)
    ]


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1) + 1e-12)


def whole_model_effect(
    bert: LoadedBert,
    run: BertRun,
    layers: Iterable[int],
    alpha: float = 1.0,
    source: Source = 0,
    roles: Iterable[str] = ROLES,
) -> dict[str, float]:
    """Run the whole BERT with `layers` pulled to shared projections (on copies of the weights).

    Returns the cosine similarity to the original model of the sentence embedding (mean of the
    final hidden states, as all-MiniLM-L6-v2 pools) and the mean and minimum per-token cosine.
    The layers before the first changed one are not run again: their output is run.hidden_states.
    """
    roles, layers = tuple(roles), sorted(set(layers))
    old = run.hidden_states[-1]  # (T, C)
    if not layers:
        return {"sentence embedding cosine": 1.0, "mean token cosine": 1.0, "min token cosine": 1.0}
    replace = {i: _interpolate_in_place(bert.scratch_layer(i), alpha, source, roles) for i in layers}
    with torch.inference_mode():  # the layers before the first changed one are the run's own
        states, _ = bert.run_layers(run.layer_input(layers[0]), replace=replace, start=layers[0])
    new = states[-1][0].float().numpy()  # (T, C)
    per_token = _cosine(new, old)  # (T,)
    return {
        "sentence embedding cosine": float(_cosine(new.mean(0), old.mean(0))),
        "mean token cosine": float(per_token.mean()),
        "min token cosine": float(per_token.min()),
    }


@dataclass(frozen=True)
class Answer:
    """The check question's answer in numbers: BERT's own heads (alpha = 0) against the shared
    end of the path (alpha = 1), and the parameters of a layer with `roles` shared."""

    roles: tuple[str, ...]
    same_attention: bool  # W^Q and W^K shared: every head computes the same attention
    diversity_bert: float
    diversity_shared: float
    overlap_bert: float  # W^Q subspace overlap
    overlap_shared: float
    rank_bert: float  # effective rank of the concatenated head outputs
    rank_shared: float
    rank_bound: int | None  # D = C / H when Q, K and V are all shared (else no such bound)
    params_distinct: int
    params_shared: int  # with only `roles` shared

    @property
    def params_saved(self) -> int:
        return self.params_distinct - self.params_shared

    @property
    def one_head(self) -> bool:
        """Q, K and V all shared: the layer is one head computed H times."""
        return self.rank_bound is not None


def answer(sweep: list[dict[str, float]], d_model: int, n_heads: int, roles: Iterable[str]) -> Answer:
    """The numbers of the collapse page's answer, from alpha_sweep's measures."""
    roles = tuple(sorted(roles))
    first, last = sweep[0], sweep[-1]
    distinct = MultiHeadAttention.parameter_count(d_model, n_heads, "distinct")
    D = d_model // n_heads
    per_role, shared_role = d_model * d_model + d_model, d_model * D + D  # one W and its bias
    return Answer(
        roles=roles,
        same_attention={"q", "k"} <= set(roles),
        diversity_bert=first["head diversity (JS)"],
        diversity_shared=last["head diversity (JS)"],
        overlap_bert=first["subspace overlap W^Q"],
        overlap_shared=last["subspace overlap W^Q"],
        rank_bert=first["effective rank"],
        rank_shared=last["effective rank"],
        rank_bound=d_model // n_heads if set(roles) == set(ROLES) else None,
        params_distinct=distinct,
        params_shared=distinct - len(roles) * (per_role - shared_role),
    )


def sweep_csv(sweep: list[dict[str, float]]) -> bytes:
    """The measures along alpha as CSV, one row per alpha."""
    import pandas as pd

    return pd.DataFrame(sweep).to_csv(index=False, float_format="%.6g").encode()
