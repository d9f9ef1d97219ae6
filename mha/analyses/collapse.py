"""The lesson's check question, on real weights: give every head the same Q/K/V projection.

Everything here builds NEW modules from copies of the weights; the source module (and the
cached BERT it came from) is never modified.

- `shared_module(m, source, roles)`: a module whose shared roles have ONE projection (C x D) used
  by every head (structure, not equal values): head `source`'s slice of m's projection, the mean
  of all heads' slices rescaled to their typical norm (the default, DEFAULT_SOURCE), or the plain
  mean; the other roles and W^O are kept.
- Why rescale: the mean of H roughly independent slices is about 1/sqrt(H) as long as one slice,
  so a plain-mean W^Q and W^K shrink every score about H times and the one map left is nearly
  uniform: "the heads are identical" and "the one head left is flat" would be mixed up. The
  rescaled mean keeps a slice's norm (sqrt of the mean of the slices' squared Frobenius norms),
  so the one head left attends about as sharply as BERT's own heads.
- A model whose K and V already come in groups (grouped-query attention: heads=(H, G, G)) starts
  the path from that structure: a K/V group's projection is pulled as one, and a role not shared
  keeps its groups.
- `interpolate(m, alpha, ...)`: the continuous path W_i(alpha) = (1 - alpha) W_i + alpha W_shared
  for every head i (every group, for grouped K/V), in the module's own structure (alpha = 0: m
  itself; every head still has its own weights, equal ones at alpha = 1).
- `CollapsePath(alpha, source, roles)`: one point on that path, the settings of the collapse page
  passed whole; `module_at(m, path)` is its module: interpolate below 1, shared_module at 1,
  where sharing really removes parameters.
- One cache beside the app's store (ui/store.py, which keeps per-sentence results): `_OVERLAPS`,
  the (H, H) subspace overlap of each layer, role and path point, kept per model (weakly: gone with
  the model). It depends on the weights alone, so every sentence and session shares it; at most
  4,096 entries (about 1 KB each for 12 heads, ~4 MB), cleared whole when full.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch

from mha.analyses import metrics
from mha.core.attention import ROLES, AttentionTrace, MultiHeadAttention

if TYPE_CHECKING:
    from mha.models.family import LoadedModel
    from mha.models.run import Run
    from mha.models.traits import Traits

Source = int | Literal["scaled", "mean"]
POOLED: tuple[Source, ...] = ("scaled", "mean")  # the shared slices made from every head's
DEFAULT_SOURCE: Source = "scaled"  # the shared slice everywhere unless the learner picks another


def _roles(roles: Iterable[str]) -> tuple[str, ...]:
    roles = tuple(sorted(set(roles)))
    if bad := [r for r in roles if r not in ROLES]:
        raise ValueError(f"roles must be among {ROLES}, got {bad}")
    return roles


@dataclass(frozen=True)
class CollapsePath:
    """One point on the path from distinct to shared projections: W_i(alpha) = (1 - alpha) W_i +
    alpha W_shared for the projections in `roles` (sorted), W_shared being head `source`'s slice or
    the mean of every head's. At alpha = 1 a shared projection is one matrix for every head."""

    alpha: float = 1.0
    source: Source = DEFAULT_SOURCE
    roles: tuple[str, ...] = ROLES

    def __post_init__(self) -> None:
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha must be in [0, 1], got {self.alpha}")
        if self.source not in POOLED and not (isinstance(self.source, int) and self.source >= 0):
            raise ValueError(f"source must be one of {POOLED} or a head index, got {self.source!r}")
        object.__setattr__(self, "alpha", float(self.alpha))
        object.__setattr__(self, "roles", _roles(self.roles))

    def at(self, alpha: float) -> CollapsePath:
        """The same path at another alpha."""
        return replace(self, alpha=alpha)

    @property
    def source_name(self) -> str:
        """The shared slice in words."""
        return source_name(self.source)


def source_name(source: Source) -> str:
    """A shared slice in words."""
    if source == "scaled":
        return "the mean of the heads' slices, rescaled to a slice's norm"
    if source == "mean":
        return "the plain mean of the heads' slices"
    return f"head {source}'s slice"


def source_label(source: Source) -> str:
    """A shared slice in two words, for a picker."""
    return {"scaled": "rescaled mean", "mean": "plain mean"}.get(source, f"head {source}")  # type: ignore[arg-type]


def _head_slices(w: torch.Tensor, n: int) -> torch.Tensor:
    """(C_out, ...) weight or bias of a role's n projections -> (n, D, ...) their slices (n = H for
    distinct heads, G for K/V groups)."""
    return w.reshape(n, w.shape[0] // n, *w.shape[1:])  # (n, D, C) or (n, D)


def _group_norm_ratios(groups: torch.Tensor) -> torch.Tensor:
    """(G, n, D, C) the slices of G groups -> (G,) the factor that gives each group's mean slice a
    slice's norm: sqrt(mean_i ||W_i||_F^2) / ||mean_i W_i||_F (1 where the mean is 0)."""
    typical = groups.pow(2).sum((2, 3)).mean(1).sqrt()  # (G,) a slice's norm in each group
    pooled = groups.mean(1).norm(dim=(1, 2))  # (G,)
    return torch.where(pooled > 0, typical / torch.where(pooled > 0, pooled, 1.0), 1.0)


def norm_ratio(weight: torch.Tensor, H: int) -> float:
    """The factor that gives the mean of the H slices of `weight` (H*D, C) a slice's norm (about
    sqrt(H) for unrelated slices, 1 for equal ones): _group_norm_ratios of one group of every head."""
    return float(_group_norm_ratios(_head_slices(weight.detach(), H)[None])[0])  # (1, H, D, C) in


def norm_ratios(m: MultiHeadAttention) -> dict[str, float]:
    """norm_ratio of each of m's roles over its own projections (H distinct heads, or G K/V groups)."""
    return {r: norm_ratio(getattr(m, f"{r}_proj").weight, n) for r, n in zip(ROLES, m.role_heads)}


def shared_slice(
    w: torch.Tensor, H: int, source: Source = DEFAULT_SOURCE, scale: float = 1.0, n: int | None = None
) -> torch.Tensor:
    """The one slice every head will use: the rows head `source` reads, or the mean of the role's
    n projections (n = H unless K/V come in groups) times `scale` (for source "scaled", norm_ratio
    of the projection's weight, applied to its bias too)."""
    n = n or H
    slices = _head_slices(w, n)
    if source in POOLED:
        return slices.mean(0) * scale
    if not isinstance(source, int) or not 0 <= source < H:
        raise ValueError(f"source must be one of {POOLED} or a head index in 0..{H - 1}, got {source!r}")
    return slices[source // (H // n)]  # the projection of head source's group


def _scale(proj: torch.nn.Linear, n: int, source: Source) -> float:
    """The factor on a pooled slice of `proj` (n projections): norm_ratio for "scaled", else 1."""
    return norm_ratio(proj.weight, n) if source == "scaled" else 1.0


def _check(m: MultiHeadAttention) -> None:
    """The path starts from a model's own structure: distinct Q (every head its own W^Q) and K and V
    alike, distinct or in groups (grouped-query attention, or one K/V head: multi-query attention, as
    Gemma 3 270M has), never from a module whose Q is already shared."""
    if m.role_heads[0] != m.n_heads or m.role_heads[1] != m.role_heads[2]:
        raise ValueError("start from a module whose W^Q is per head and whose K/V are per head or in groups")


def shared_module(
    m: MultiHeadAttention, source: Source = DEFAULT_SOURCE, roles: Iterable[str] = ROLES
) -> MultiHeadAttention:
    """A copy of m in which every role of `roles` has one projection (C x D) used by every head:
    head `source`'s slice of m's projection, or the mean of every head's slice. heads=(1, 1, 1) when
    every role is shared."""
    _check(m)
    roles = _roles(roles)
    H = m.n_heads
    bias = m.q_proj.bias is not None
    heads = tuple(1 if r in roles else n for r, n in zip(ROLES, m.role_heads))
    if source in POOLED:  # the mean of every head's slice: all heads pooled into one
        return group_heads(m, heads, rescale=source == "scaled")
    with torch.inference_mode(False), torch.no_grad():  # ordinary tensors, no autograd
        s = m.with_heads(heads, empty=True)
        for role in ROLES:
            src = getattr(m, f"{role}_proj")
            if role not in roles:  # kept as it is: the same tensors
                s.set_projection(role, src.weight, src.bias)
                continue
            n = m.role_heads[ROLES.index(role)]
            b = shared_slice(src.bias, H, source, n=n) if bias else None  # a head's own slice: no rescaling
            s.set_projection(role, shared_slice(src.weight, H, source, n=n).clone(), b if b is None else b.clone())
        s.set_projection("o", m.out_proj.weight, m.out_proj.bias)
    return s.eval().requires_grad_(False)


def group_heads(module: MultiHeadAttention, heads: tuple[int, int, int], rescale: bool = False) -> MultiHeadAttention:
    """A copy of `module` with heads = (q, k, v) projections of Q, K and V: the heads of each
    group of consecutive heads are mean-pooled into one (Ainslie et al. 2023 do this for K and V;
    one group of every head is the mean slice of shared_module); with `rescale`, each pooled
    projection (weight and bias) is multiplied by its group's norm_ratio, so it keeps a slice's
    norm. A role that keeps its number of projections, and W^O, are copied as they are. The result
    is structural: a pooled role is one parameter per group (MultiHeadAttention(heads=...))."""
    H, D, C = module.n_heads, module.d_head, module.d_model
    bias = module.q_proj.bias is not None
    with torch.inference_mode(False), torch.no_grad():
        out = module.with_heads(tuple(heads), empty=True)  # checks that each count divides H
        for role, n_src, n_dst in zip(ROLES, module.role_heads, out.role_heads):
            src = getattr(module, f"{role}_proj")
            if n_src == n_dst:  # kept as it is: the same tensors
                out.set_projection(role, src.weight, src.bias)
                continue
            per_group = H // n_dst
            w = src.weight.detach().reshape(n_src, D, C).repeat_interleave(H // n_src, 0)  # (H, D, C)
            groups = w.reshape(n_dst, per_group, D, C)  # (G, H/G, D, C)
            pooled = groups.mean(1)  # (G, D, C)
            factor = _group_norm_ratios(groups) if rescale else torch.ones(n_dst)  # (G,)
            pooled_b = None
            if bias:
                b = src.bias.detach().reshape(n_src, D).repeat_interleave(H // n_src, 0)  # (H, D)
                pooled_b = b.reshape(n_dst, per_group, D).mean(1) * factor[:, None]  # (G, D)
                pooled_b = pooled_b.reshape(n_dst * D)  # (G D,)
            out.set_projection(role, (pooled * factor[:, None, None]).reshape(n_dst * D, C), pooled_b)
        out.set_projection("o", module.out_proj.weight, module.out_proj.bias)
    return out.eval().requires_grad_(False)


def interpolate(
    m: MultiHeadAttention, alpha: float, source: Source = DEFAULT_SOURCE, roles: Iterable[str] = ROLES
) -> MultiHeadAttention:
    """A new distinct-mode module with W_i(alpha) = (1 - alpha) W_i + alpha W_shared for `roles`.

    roles: which projections are pulled together ("q", "k", "v"). Sharing only Q and K makes
    every head's attention pattern the same but leaves the values distinct. Every head keeps its
    own weights, even at alpha = 1 (use module_at or shared_module for the shared structure).
    Not a copy: the pulled projections are new tensors, but W^O and the projections not in
    `roles` are m's own tensors, borrowed (m.borrowing()): read them, never write them (writing
    writes m, and the model m came from).
    """
    _check(m)
    with torch.inference_mode(False):
        return _pull(m.borrowing(), alpha, source, roles)


def module_at(m: MultiHeadAttention, path: CollapsePath) -> MultiHeadAttention:
    """The module at path.alpha on the path from m to shared path.roles: interpolated weights
    below 1, the shared structure (shared_module) at 1. New tensors for the pulled projections;
    the others borrowed from m, as interpolate says."""
    _check(m)
    with torch.inference_mode(False):
        return _at(m.borrowing(), path)


def _at(m: MultiHeadAttention, path: CollapsePath) -> MultiHeadAttention:
    """module_at on a module the caller owns (scratch_layer's, or a borrowing one): its pulled
    projections replaced by new tensors below alpha = 1 (m's own tensors are never written)."""
    if path.alpha == 1.0:
        return shared_module(m, path.source, path.roles)
    return _pull(m, path.alpha, path.source, path.roles)


def _pull(m: MultiHeadAttention, alpha: float, source: Source, roles: Iterable[str]) -> MultiHeadAttention:
    """interpolate() on a module the caller owns: each pulled projection of m gets new tensors
    (set_projection), so tensors m shares with the model are read, never written."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    roles = _roles(roles)
    H = m.n_heads
    with torch.inference_mode(False), torch.no_grad():  # ordinary tensors, no autograd
        for role in roles:
            proj, n = getattr(m, f"{role}_proj"), m.role_heads[ROLES.index(role)]
            scale = _scale(proj, n, source)  # from the weight before it is pulled
            new = []
            for w in (proj.weight, proj.bias):
                if w is None:
                    new.append(None)
                    continue
                per_head = _head_slices(w, n)  # (n, D, ...): one slice per projection of the role
                target = shared_slice(w, H, source, scale, n).expand_as(per_head)
                new.append(((1 - alpha) * per_head + alpha * target).reshape(w.shape))
            m.set_projection(role, *new)
    return m.eval().requires_grad_(False)


@dataclass
class LayerCollapse:
    """One BERT layer recomputed with heads pulled towards a shared projection.

    weights: (H, T, T) attention of every head on BERT's real input to the layer.
    concat: (T, C) the heads' outputs side by side (before W^O).
    diversity: (H, H) Jensen-Shannon divergence between heads (metrics.head_diversity).
    overlap: role -> (H, H) mean cos^2 of principal angles between heads' W slices.
    effective_heads: how many different outputs the heads write (metrics.effective_heads of their
        outputs): H for unrelated heads, 1 when every head outputs the same thing.
    distinct_maps: the number of different attention maps (metrics.distinct_maps).
    score_spread: (H,) the spread of each head's scaled scores (metrics.score_spread): near 0,
        a flat map.
    parameters: of the module (fewer only where a role is really shared, at alpha = 1).
    """

    alpha: float
    weights: np.ndarray
    concat: np.ndarray
    diversity: np.ndarray
    overlap: dict[str, np.ndarray]
    effective_heads: float
    distinct_maps: int
    score_spread: np.ndarray
    parameters: int = 0
    causal: bool = False  # a decoder's layer: the measures count only the pairs its softmax compares
    window: int | None = None  # its sliding window: a query compares only its last `window` keys

    def summary(self) -> dict[str, float]:
        """The scalar measures: mean off-diagonal diversity and overlaps, the effective number of
        heads, the distinct maps, the mean score spread, the mean entropy of a map / ln T, the
        largest difference between heads' weights (metrics.head_spread) and the parameters."""
        out = {"alpha": self.alpha, "head diversity (JS)": metrics.mean_off_diagonal(self.diversity)}
        for role, m in self.overlap.items():
            out[f"subspace overlap W^{role.upper()}"] = metrics.mean_off_diagonal(m)
        out["effective number of heads"] = self.effective_heads
        out["distinct maps"] = float(self.distinct_maps)
        out["score spread"] = float(self.score_spread.mean())
        out["entropy / ln T"] = metrics.entropy_share(self.weights, self.causal, self.window)
        out["largest difference between heads"] = metrics.head_spread(self.weights)
        out["parameters"] = float(self.parameters)
        return out


def collapse_layer(
    bert: LoadedModel, run: Run, layer: int, path: CollapsePath, overlap_roles: Iterable[str] = ROLES
) -> LayerCollapse:
    """Layer `layer` of BERT at one point of the path to shared projections (module_at), with
    all measures (subspace overlap for the projections in overlap_roles)."""
    m = _at(bert.scratch_layer(layer), path)  # our own copy
    with torch.inference_mode():
        tr = m.trace(run.layer_input(layer))  # (1, T, C) in
    overlap = {r: path_overlap(bert, m, layer, path, r) for r in overlap_roles}
    return measures_from(m, tr, path.alpha, overlap=overlap)


_OVERLAPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {path point: (H, H)}


def path_overlap(bert: LoadedModel, m: MultiHeadAttention, layer: int, path: CollapsePath, role: str) -> np.ndarray:
    """head_overlap(m, role) for m = layer `layer` at a point of the path: it depends on the
    weights alone, not on the sentence, so it is kept per model (read-only; a projection that is
    not pulled is the model's own at any alpha)."""
    memo = _OVERLAPS.setdefault(bert, {})
    key = (layer, path, role) if role in path.roles else (layer, role)
    found = memo.get(key)
    if found is None:
        if len(memo) > 4096:  # ~1 KB each for 12 heads: a bound, not a working set
            memo.clear()
        found = head_overlap(m, role)
        found.setflags(write=False)
        memo[key] = found
    return found


def head_overlap(m: MultiHeadAttention, role: str) -> np.ndarray:
    """(H, H) subspace overlap of the heads' `role` projections: computed over the role's own
    projections and read by each head through its group (1 between heads of one group)."""
    H, n = m.n_heads, m.role_heads[ROLES.index(role)]
    w = getattr(m, f"{role}_proj").weight.detach().numpy()  # (n*D, C)
    group = np.arange(H) // (H // n)  # (H,) which projection head i reads
    overlap = metrics.subspace_overlap(w, n)[np.ix_(group, group)]  # (H, H)
    overlap[group[:, None] == group[None, :]] = 1.0  # one projection: the same subspace, exactly
    return overlap


def measures_from(
    m: MultiHeadAttention,
    trace: AttentionTrace,
    alpha: float = float("nan"),
    overlap_roles: Iterable[str] = ROLES,
    overlap: dict[str, np.ndarray] | None = None,
) -> LayerCollapse:
    """The measures of module m from its trace on one sentence (batch of 1; torch or numpy
    arrays), and the subspace overlaps, if already known."""
    overlap = {r: head_overlap(m, r) for r in overlap_roles} if overlap is None else overlap
    weights, heads, scaled = (np.asarray(t[0]) for t in (trace.weights, trace.heads, trace.scaled))  # (H, T, .)
    return LayerCollapse(
        alpha,
        weights,
        np.asarray(trace.concat[0]),
        metrics.head_diversity(metrics.causal_rows(weights, m.causal)),  # a causal first row has no choice
        overlap,
        metrics.effective_heads(heads),
        metrics.distinct_maps(weights, SAME_WEIGHTS),
        metrics.score_spread(scaled, m.causal, m.window),
        m.num_parameters(),
        m.causal,
        m.window,
    )


SWEEP_STEPS = 11  # alpha = 0, 0.1, ..., 1


def sweep_alphas(steps: int = SWEEP_STEPS) -> list[float]:
    """`steps` evenly spaced alphas from 0 (distinct) to 1 (shared)."""
    return [float(a) for a in np.linspace(0.0, 1.0, steps)]


def alpha_sweep(
    bert: LoadedModel, run: Run, layer: int, path: CollapsePath, steps: int = SWEEP_STEPS
) -> list[dict[str, float]]:
    """The scalar measures (diversity, the subspace overlap of W^Q, W^K and W^V, effective rank)
    at the `steps` alphas of sweep_alphas on the path's source and roles (its own alpha is not used)."""
    return [collapse_layer(bert, run, layer, path.at(a)).summary() for a in sweep_alphas(steps)]


def sweep_counts(n_heads: int, steps: int = SWEEP_STEPS) -> tuple[int, int, int]:
    """What the sweep computes, for mha.models.cost.measures_macs: (runs of the layer, head maps measured
    alone, pairs of head maps compared): at each alpha the layer's run, each head's map normalised,
    its entropy and its score spread, and every two heads' Jensen-Shannon divergence."""
    return steps, 3 * n_heads * steps, n_heads * (n_heads - 1) // 2 * steps


def _effect(new: np.ndarray, old: np.ndarray) -> dict[str, float]:
    """How far final hidden states (T, C) moved: sentence embedding (mean pooling) and per-token cosines."""
    per_token = metrics.cosine(new, old)  # (T,)
    return {
        "sentence embedding cosine": float(metrics.cosine(new.mean(0), old.mean(0))),
        "mean token cosine": float(per_token.mean()),
        "min token cosine": float(per_token.min()),
    }


def final_key(traits: Traits) -> str:
    """Which cosine says how close a model's final states stay: a sentence encoder's output is its
    mean-pooled sentence embedding ("sentence embedding cosine"); a next-token model pools nothing
    and its first token's state is many times longer than the others' ("mean token cosine")."""
    return "sentence embedding cosine" if traits.task == "similarity" else "mean token cosine"


def final_cosine(new: np.ndarray, old: np.ndarray, traits: Traits) -> float:
    """How close final hidden states (T, C) stay to the model's own (final_key's cosine)."""
    return _effect(new, old)[final_key(traits)]


def whole_model_effect(bert: LoadedModel, run: Run, layers: Iterable[int], path: CollapsePath) -> dict[str, float]:
    """Run the whole BERT with `layers` at a point of the path to shared projections (module_at,
    on copies).

    Returns the cosine similarity to the original model of the sentence embedding (mean of the
    final hidden states, as all-MiniLM-L6-v2 pools) and the mean and minimum per-token cosine.
    The layers before the first changed one are not run again: their output is run.hidden_states.
    """
    layers = sorted(set(layers))
    old = run.hidden_states[-1]  # (T, C)
    if not layers:
        return _effect(old, old)
    replace = {i: _at(bert.scratch_layer(i), path) for i in layers}
    with torch.inference_mode():  # the layers before the first changed one are the run's own
        states, _ = bert.run_layers(run.layer_state(layers[0]), replace=replace, start=layers[0], keep=False)
    return _effect(states[-1][0].float().numpy(), old)


def output_cosine(bert: LoadedModel, run: Run, layer: int, path: CollapsePath) -> float:
    """The mean over tokens of the cosine between layer `layer`'s attention sub-layer output (W^O
    applied, before the residual) at a point of the path and the model's own: what the conversion does
    to the layer itself, which the residual stream hides from the last states."""
    x = run.layer_input(layer)  # (1, T, C)
    with torch.inference_mode():
        new, own = _at(bert.scratch_layer(layer), path)(x)[0], bert.scratch_layer(layer)(x)[0]  # (1, T, C) each
    return float(metrics.cosine(new[0].numpy(), own[0].numpy()).mean())


def removal_mask(bert: LoadedModel, layers: Iterable[int]) -> np.ndarray:
    """(L, H) head mask with every head of `layers` removed (0) and the others kept (1)."""
    mask = np.ones((bert.n_layers, bert.n_heads), dtype=np.float32)
    mask[sorted(set(layers))] = 0.0
    return mask


def removal_effect(bert: LoadedModel, run: Run, layers: Iterable[int]) -> dict[str, float]:
    """A baseline for whole_model_effect: the same measures with every head of `layers` removed
    (its output zeroed before W^O, so the attention sub-layer adds only W^O's bias)."""
    layers = sorted(set(layers))
    start = layers[0] if layers else bert.n_layers  # the layers before the first changed one are the run's own
    with torch.inference_mode():
        mask = torch.as_tensor(removal_mask(bert, layers))  # (L, H)
        states, _ = bert.run_layers(run.layer_state(start), head_mask=mask, start=start, keep=False)
    new = states[-1][0].float().numpy() if states else run.hidden_states[-1]
    return _effect(new, run.hidden_states[-1])


SAME_TOLERANCE = 1e-6  # head diversity (nats) below which the heads count as computing one map
SAME_WEIGHTS = 1e-5  # largest difference between two heads' attention weights that is still one map


def sweep_csv(sweep: list[dict[str, float]]) -> bytes:
    """The measures along alpha as CSV, one row per alpha."""
    import pandas as pd

    return pd.DataFrame(sweep).to_csv(index=False, float_format="%.6g").encode()
