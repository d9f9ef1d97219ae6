"""What may be shared across heads: the ladder MHA -> GQA -> MQA -> shared Q/K/V (and the contrasts
shared Q and K, shared Q), each rung a layer of that structure converted from a trained one by
mean-pooling, its measures on a sentence, its K/V cache as a decoder, and its uptraining.

- Shazeer 2019, "Fast Transformer Decoding: One Write-Head is All You Need": multi-query
  attention, one K and one V for all heads.
- Ainslie et al. 2023, "GQA: Training Generalized Multi-Query Transformer Models from Multi-Head
  Checkpoints": G groups of heads share K/V; a trained model is converted by mean-pooling each
  group's K/V heads, then briefly uptrained (uptrain.py).

Everything works on copies; the cached model is never modified.
Shapes: B batch, N sentences, T tokens, C = d_model, H heads, G K/V groups, D = C / H.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from mha.analyses import collapse, metrics
from mha.analyses.collapse import group_heads
from mha.analyses.uptrain import UptrainProgress, UptrainResult, uptrain
from mha.core.attention import ROLES, MultiHeadAttention, role_heads

if TYPE_CHECKING:
    from mha.models.family import LoadedModel
    from mha.models.run import Run
    from mha.models.structures import Structure


def group_kv(module: MultiHeadAttention, kv_heads: int) -> MultiHeadAttention:
    """A grouped-query copy of a module whose heads have their own queries: the K and V heads of
    each group of H / kv_heads consecutive heads are mean-pooled into one (Ainslie et al. 2023);
    W^Q and W^O are kept. A module whose heads already share K/V within those groups is unchanged."""
    if module.role_heads[0] != module.n_heads:
        raise ValueError("group_kv starts from per-head queries (a shared module has one head)")
    H = module.n_heads
    return group_heads(module, role_heads(H, (H, kv_heads, kv_heads)))


@dataclass(frozen=True)
class Rung:
    """One step of the ladder: a name and the layer's structure, heads = (q, k, v) projections of
    Q, K and V for its n_heads heads (MHA: (H, H, H); GQA-G: (H, G, G); MQA: (H, 1, 1); shared
    Q/K/V: (1, 1, 1); shared Q and K: (1, 1, H)). A converted layer is built with exactly this
    structure, so its parameter count, gradients and training follow from it. rescale: each
    pooled projection keeps its group's typical norm (collapse.group_heads); without it, the
    plain mean of Ainslie et al. 2023, about 1/sqrt(group size) of a slice's norm."""

    name: str
    heads: tuple[int, int, int]
    n_heads: int
    rescale: bool = False

    @property
    def pooling(self) -> str:
        """How the converted projections were made, in words (for display only)."""
        return "scale restored" if self.rescale else "mean-pooled"  # the table's two columns

    @property
    def shares(self) -> str:
        """What is shared across heads, in words (for display only)."""
        H = self.n_heads
        one = [r.upper() for r, g in zip(ROLES, self.heads) if g == 1 and H > 1]
        grouped = {g for g in self.heads if 1 < g < H}
        if grouped:
            names = [r.upper() for r, g in zip(ROLES, self.heads) if 1 < g < H]
            return f"{', '.join(names)} in {grouped.pop()} groups"
        return ", ".join(one) if one else "nothing"

    @property
    def same_attention(self) -> bool:
        """One Q and one K projection for every head: every head computes the same map."""
        return self.heads[:2] == (1, 1) and self.n_heads > 1

    def module(self, layer: MultiHeadAttention) -> MultiHeadAttention:
        """The layer converted to this rung (a copy; each group's heads mean-pooled, as Ainslie
        et al. 2023 do for K and V)."""
        return layer if layer.role_heads == self.heads else group_heads(layer, self.heads, self.rescale)

    def parameter_count(self, d_model: int, bias: bool = True, d_head: int | None = None, qk_norm: bool = False) -> int:
        """Parameters of a layer of this structure (d_head, qk_norm: the model's, Traits.head_dim and qk_norm)."""
        return MultiHeadAttention.parameter_count(d_model, self.n_heads, self.heads, bias, d_head, qk_norm)


def rungs(n_heads: int, rescale: bool = False, kv_heads: int | None = None) -> list[Rung]:
    """The model's own structure first: MHA, or GQA-G for a model whose K/V already come in
    kv_heads groups (pooling cannot split a group again, so the ladder starts there); then GQA
    with every proper divisor g of G (largest first), MQA, shared Q/K/V; and, as contrasts, Q and
    K shared with V as the model has it, and Q alone shared (pooled projections rescaled to their
    groups' norm if `rescale`). A multi-query model (G = 1) is its own MQA rung, and only shared
    Q/K/V lies below it: with one K and one V, the two contrasts are that same structure."""
    H = n_heads
    G = H if kv_heads is None else kv_heads
    groups = [g for g in range(G - 1, 1, -1) if G % g == 0]
    own = "MHA" if G == H else "MQA" if G == 1 else f"GQA-{G}"
    rungs = [Rung(own, (H, G, G), H)]
    rungs += [Rung(f"GQA-{g}", (H, g, g), H, rescale) for g in groups]
    if H > 1:
        rungs += [Rung("MQA", (H, 1, 1), H, rescale)] if G > 1 else []
        rungs += [Rung("shared Q/K/V", (1, 1, 1), H, rescale)]
        rungs += (  # with one K and one V already, sharing Q, K or Q alone is the same structure as Q/K/V
            [Rung("shared Q, K", (1, 1, G), H, rescale), Rung("shared Q", (1, G, G), H, rescale)] if G > 1 else []
        )
    return rungs


def kv_cache_bytes(
    n_layers: int, kv_heads: int, d_head: int, bytes_per_value: int = 2, v_heads: int | None = None
) -> int:
    """Bytes of K/V cache per token of a decoder: K and V, every layer, every K head and V head
    (v_heads = kv_heads unless given; fp16 = 2 bytes per value)."""
    v_heads = kv_heads if v_heads is None else v_heads
    return n_layers * (kv_heads + v_heads) * d_head * bytes_per_value


def size(n_bytes: float) -> str:
    """A size in binary units to 3 significant digits, one rule everywhere: 2.25 KiB, 13.5 KiB, 1.5 MiB."""
    x = float(n_bytes)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if x < 1000 or unit == "GiB":
            return f"{x:,.0f} bytes" if unit == "bytes" else f"{x:.3g} {unit}"
        x /= 1024
    raise AssertionError("unreachable")


CONTEXTS = (4096, 32768)  # context lengths the cache is said at: what generation reads for every new token


def gqa_groups(n_heads: int) -> int | None:
    """A GQA group count for a model of n_heads heads: the proper divisor of H nearest to H / 4
    (a quarter of MHA's K/V cache, as GQA-8 on 32 heads), or None if H has no proper divisor."""
    proper = [g for g in range(2, n_heads) if n_heads % g == 0]
    return min(proper, key=lambda g: (abs(g - n_heads / 4), -g)) if proper else None


def cache_table(shapes: dict[str, tuple[int, int, int]]) -> list[dict[str, str]]:
    """K/V cache per token (fp16) of decoders of these shapes {name: (layers, heads, d_head)} with
    MHA, GQA (gqa_groups of each model's heads) and MQA, and what each keeps of MHA's."""
    rows = []
    for name, (layers, heads, d_head) in shapes.items():
        mha = kv_cache_bytes(layers, heads, d_head)
        g = gqa_groups(heads)
        rows.append(
            {
                "model": name,
                "MHA": size(mha),
                "GQA": "none (no proper divisor)"
                if g is None
                else f"GQA-{g}: {size(kv_cache_bytes(layers, g, d_head))} (1/{heads // g})",
                "MQA": f"{size(kv_cache_bytes(layers, 1, d_head))} (1/{heads})",
            }
        )
    return rows


def built_cache_table(models: list[Structure]) -> list[dict[str, str]]:
    """K/V cache (fp16) of models as they are built (mha.models.structures.Structure): per token with
    their own K/V heads (or MLA's latent), beside what a K and V per query head would need, and the
    whole cache at each of CONTEXTS tokens, each sliding-window layer capped at its window (what
    generation reads for every new token)."""
    rows = []
    for s in models:
        mla = s.latent is not None
        rows.append(
            {
                "model": s.name,
                "layers": str(s.n_layers)
                + (f" ({s.sliding} with a window of {max(w or 0 for w in s.windows):,})" if s.sliding else ""),
                "query heads": str(s.n_heads),
                "K/V heads per layer": f"none: a latent of {s.latent} values" if mla else str(s.kv_heads),
                "K/V cache per token, as built": size(s.per_token()),
                "with a K and V per head": "—" if mla else size(kv_cache_bytes(s.n_layers, s.n_heads, s.d_head)),
                **{f"at {n:,} tokens": size(s.cache_bytes(n)) for n in CONTEXTS},
            }
        )
    return rows


def built_cache_words(models: list[Structure]) -> str:
    """What built_cache_table shows, in words made from each structure: its K/V heads beside its query
    heads, the window's cap where it has one, MLA's latent."""
    parts = []
    for s in models:
        if s.latent is not None:
            parts.append(
                f"{s.name} caches no head's K or V but one latent of {s.latent} values per layer (multi-head "
                "latent attention, DeepSeek-AI 2024)"
            )
            continue
        part = f"{s.name} keeps {s.kv_heads} K/V head{'s' * (s.kv_heads != 1)} for its {s.n_heads} query heads" + (
            f", 1/{s.n_heads // s.kv_heads} of the cache a K and V per head would need"
            if s.kv_heads < s.n_heads
            else ", one per head"
        )
        if s.sliding:
            n = CONTEXTS[-1]
            part += (
                f"; its {s.sliding} sliding-window layers keep only their last {max(w or 0 for w in s.windows):,} "
                f"tokens, so at {n:,} tokens its cache is {size(s.cache_bytes(n))}, not {size(s.per_token() * n)}"
            )
        parts.append(part)
    return (
        "Generation reads the whole K/V cache again for every token it writes: the last two columns are what that "
        "read is at those context lengths. GPT-2 small from Transformers' GPT2Config (Radford et al. 2019); SmolLM2 "
        "and Gemma 3 from their config.json once fetched; Llama-3-8B, Mistral-7B and DeepSeek-V3 from their public "
        "config.json (mha/models/structures.py). "
        + "; ".join(parts)
        + ". Layers x (K heads + V heads) x $d_k$ values, 2 bytes each (fp16)."
    )


REFERENCE_MODELS = {  # (layers, heads, d_head) of decoders for the cache comparison
    "bert-base shape (12 x 12 x 64)": (12, 12, 64),
    "a 7B model (32 x 32 x 128), e.g. Llama 2 7B": (32, 32, 128),
}


@dataclass
class RungMeasures:
    """A rung on the learner's sentence, against BERT's own layer.

    drift: mean over heads and tokens of the Jensen-Shannon divergence between the rung's and
        BERT's attention of the same head (nats; 0 = the same maps; a causal map's first row, which
        has one key, left out as diversity leaves it out).
    diversity: mean JS divergence between the rung's heads (0 = every head the same map).
    random_diversity: the same of random maps exactly as sharp as the rung's own (metrics.shuffled_diversity):
        what heads of this sharpness reach with nothing in common.
    layer_cosine: mean over tokens of the cosine between the rung's and BERT's attention output.
    sentence_cosine: how close the whole model's last states stay (collapse.final_cosine: BERT's
        sentence embedding, mean pooling; a decoder's mean cosine per token).
    """

    rung: Rung
    parameters: int
    kv_cache: int  # bytes per token, fp16, for this model's shape
    drift: float
    diversity: float
    layer_cosine: float  # nan: the layer has no W^O bias, so its attention removed leaves no output
    sentence_cosine: float | None  # None: not measured (ladder_measures(whole=False))
    random_diversity: float = float("nan")  # random maps exactly as sharp as this rung's own (RANDOM_SEEDS shuffles)


def rung_measures(
    bert: LoadedModel, run: Run, layer: int, rung: Rung, module: MultiHeadAttention | None = None
) -> RungMeasures:
    """The measures of a rung for one layer (module: an uptrained version of the rung, if any)."""
    original = bert.scratch_layer(layer)
    return ladder_measures(bert, run, layer, [(rung, module if module is not None else rung.module(original))])[0]


def ladder_measures(
    bert: LoadedModel,
    run: Run,
    layer: int,
    modules: list[tuple[Rung, MultiHeadAttention]],
    whole: bool = True,
) -> list[RungMeasures]:
    """rung_measures of several (rung, module) of one layer at once. The measures inside the layer
    read the run's own input to it; with `whole`, the sentence cosine runs the layers after
    `layer` on every changed module (ladder_finals), otherwise it is None (not measured)."""
    original = bert.scratch_layer(layer)
    x = run.layer_input(layer)  # (1, T, C)
    D = bert.traits.d_head
    finals = ladder_finals(bert, run, layer, [m for _, m in modules]) if whole else [None] * len(modules)
    out = []
    with torch.inference_mode():
        ref_out, ref_w = original(x)  # (1, T, C), (1, H, T, T)
        ref = metrics.Rows.of(ref_w[0].numpy()).causal(original.causal)  # BERT's own rows, once for every rung
        for (rung, m), final in zip(modules, finals):
            o, w = m(x)  # one module at a time: one (H, T, T) alive, not one per rung
            rows = metrics.Rows.of(w[0].numpy()).causal(m.causal)  # the rows that had a choice
            out.append(
                RungMeasures(
                    rung=rung,
                    parameters=m.num_parameters(),
                    kv_cache=kv_cache_bytes(bert.n_layers, m.role_heads[1], D, v_heads=m.role_heads[2]),
                    drift=float(metrics.js_rows(rows, ref).mean()),  # same head, new vs old
                    diversity=metrics.mean_off_diagonal(metrics.head_diversity(rows)),
                    layer_cosine=float(metrics.cosine(o[0].numpy(), ref_out[0].numpy()).mean()),
                    sentence_cosine=final,
                    random_diversity=metrics.shuffled_diversity(w[0].numpy(), m.causal, RANDOM_SEEDS, m.window),
                )
            )
    return out


RANDOM_SEEDS = 4  # shuffles behind each rung's random-map diversity: the baseline's (metrics.shuffled_diversity)


def ladder_counts(rungs: list[Rung]) -> tuple[int, int, int]:
    """What ladder_measures computes inside the layer for these rungs, for mha.models.cost.measures_macs:
    (runs of the layer, head maps measured alone, pairs of head maps compared): the model's own layer
    and each rung's, each head's map normalised and its drift from the model's, every two heads'
    Jensen-Shannon divergence in each rung whose heads compute different maps (one Q and one K for
    every head: one map, compared once), and every two heads' of each rung's shuffled maps
    (RANDOM_SEEDS of them) and of the model's (metrics.shuffled_diversity's 4)."""
    H = rungs[0].n_heads
    pairs = H * (H - 1) // 2 * (sum(not r.same_attention for r in rungs) + RANDOM_SEEDS * len(rungs) + 4)
    return len(rungs) + 1, H * (2 * len(rungs) + 1), pairs


def ladder_finals(
    bert: LoadedModel, run: Run, layer: int, modules: list[MultiHeadAttention], chunk: int = 4
) -> list[float]:
    """How close the whole model's last states stay (collapse.final_cosine) with each module in
    place of `layer`'s attention. The layers before it are not run (the run's own states enter
    it); the layers after it run on `chunk` changed modules side by side, and a module that reads
    the model's own tensors (MHA's rung) is the run itself: cosine 1 without running anything."""
    original = bert.scratch_layer(layer)
    old_states = run.hidden_states[-1]  # (T, C)
    finals = [collapse.final_cosine(old_states, old_states, run.traits)] * len(modules)
    changed = [b for b, m in enumerate(modules) if not m.shares_weights_with(original)]
    h = run.layer_state(layer)  # (1, T, C)
    with torch.inference_mode():
        for start in range(0, len(changed), chunk):
            part = changed[start : start + chunk]
            entering = torch.cat([bert._layer(layer, h, modules[b], None, None)[0] for b in part])  # (b, T, C)
            states, _ = bert.run_layers(entering, start=layer + 1, keep=False)  # the model's own layers after it
            last = (states[-1] if states else entering).float().numpy()  # (b, T, C)
            for b, new in zip(part, last):
                finals[b] = collapse.final_cosine(new, old_states, run.traits)
    return finals


@dataclass
class Baselines:
    """What a conversion is worth against doing without: the same cosines as RungMeasures with
    every head of the layer removed (its attention sub-layer then adds only W^O's bias), and
    the sentence cosine with every head of every layer removed (None: not measured, whole=False);
    random_diversity: the head diversity of random maps exactly as sharp as the layer's own
    (metrics.shuffled_diversity), what heads of that sharpness reach with nothing in common;
    residual_ratio: how long the layer's attention output is beside the residual stream it is added
    to (the states entering the layer), mean over tokens: why one changed layer barely moves the
    last states."""

    layer_cosine: float
    sentence_cosine: float | None
    sentence_cosine_no_heads: float | None
    random_diversity: float
    residual_ratio: float = float("nan")  # mean over tokens of |attention output| / |the residual it joins|


def baselines(bert: LoadedModel, run: Run, layer: int, whole: bool = True) -> Baselines:
    """The layer without attention and the model without any head, measured as rung_measures does
    (the whole-model cosines only with `whole`)."""
    original = bert.scratch_layer(layer)
    x = run.layer_input(layer)  # (1, T, C)
    key = collapse.final_key(run.traits)
    with torch.inference_mode():
        out = original.silent_output(x)  # every head's output zeroed before W^O
        ref_out, ref_w = original(x)  # (1, T, C), (1, H, T, T)
        added = bert.residual_added(layer, ref_out)  # (1, T, C): what joins the residual stream
    residual = np.linalg.norm(run.hidden_states[layer], axis=-1)  # (T,): the states entering the layer
    silent = not bool(out.any())  # no W^O bias: nothing is left to compare, the cosine is undefined
    return Baselines(
        layer_cosine=float("nan") if silent else float(metrics.cosine(out[0].numpy(), ref_out[0].numpy()).mean()),
        sentence_cosine=collapse.removal_effect(bert, run, [layer])[key] if whole else None,
        sentence_cosine_no_heads=collapse.removal_effect(bert, run, range(bert.n_layers))[key] if whole else None,
        random_diversity=metrics.shuffled_diversity(ref_w[0].numpy(), original.causal, RANDOM_SEEDS, original.window),
        residual_ratio=float(np.mean(np.linalg.norm(added[0].numpy(), axis=-1) / residual)),
    )


def rung_attention(bert: LoadedModel, run: Run, layer: int, rung: Rung) -> np.ndarray:
    """The rung's attention (H, T, T) in one layer on the run's input to it."""
    m = rung.module(bert.scratch_layer(layer))
    with torch.inference_mode():
        return m(run.layer_input(layer))[1][0].numpy()


def held_out_cosine(bert: LoadedModel, runs: list[Run], layer: int, module: MultiHeadAttention | None = None) -> float:
    """Mean sentence-embedding cosine to BERT's own over `runs` with `layer` replaced by module
    (module None: the layer's heads removed, the baseline)."""
    change = {"head_mask": collapse.removal_mask(bert, [layer])} if module is None else {"replace": {layer: module}}
    return float(
        np.mean([collapse.final_cosine(bert.encode_with(r, **change)[-1], r.hidden_states[-1], r.traits) for r in runs])
    )


def held_out_error(original: MultiHeadAttention, module: MultiHeadAttention, runs: list[Run], layer: int) -> float:
    """The relative error of uptrain.relative_mse, ||f(x) - f_orig(x)||^2 / ||f_orig(x)||^2 summed
    over every token of `runs` (each on its BERT input to `layer`)."""
    err = total = 0.0
    with torch.inference_mode():
        for r in runs:
            x = r.layer_input(layer)  # (1, T, C)
            target = original(x)[0]
            err += float(((module(x)[0] - target) ** 2).sum())
            total += float((target**2).sum())
    return err / total


def held_out_diversity(runs: list[Run], layer: int, module: MultiHeadAttention) -> float:
    """Mean over `runs` of the head diversity (mean JS between heads) of `module` on each run's
    BERT input to `layer`."""
    with torch.inference_mode():
        maps = [module(r.layer_input(layer))[1][0].numpy() for r in runs]  # (H, T, T) each
    causal = module.causal
    return float(
        np.mean([metrics.mean_off_diagonal(metrics.head_diversity(metrics.causal_rows(w, causal))) for w in maps])
    )


@dataclass
class UptrainOutcome:
    """A rung of one layer after a short uptraining, and its held-out effect over hand-written
    sentences it was not fitted on: the mean sentence cosine to BERT's own embeddings, the
    relative error of the layer's output and the mean head diversity, converted (before) and
    uptrained (after); and the baseline, the sentence cosine with the layer's heads removed."""

    rung: Rung
    layer: int
    fit: UptrainResult
    held_out_before: float
    held_out_after: float
    diversity_before: float = float("nan")
    diversity_after: float = float("nan")
    held_out_sentences: int = 0
    error_before: float = float("nan")  # relative error on the held-out sentences
    error_after: float = float("nan")
    removed_cosine: float = float("nan")  # held-out sentence cosine with the layer's heads removed


def uptrain_rung(
    bert: LoadedModel,
    layer: int,
    rung: Rung,
    inputs: tuple[torch.Tensor, torch.Tensor],
    held_out: list[Run],
    steps: int = 1000,
    seed: int = 0,
    progress: Callable[[UptrainProgress], None] | None = None,
) -> UptrainOutcome:
    """Convert `layer` to `rung` (mean-pooling), uptrain it on `inputs`, measure both on `held_out`.
    The uptrained module keeps the rung's structure: a shared projection stays one parameter."""
    original = bert.scratch_layer(layer)
    converted = rung.module(original)
    fit = uptrain(original, converted, inputs, steps, progress, seed)
    return UptrainOutcome(
        rung,
        layer,
        fit,
        held_out_cosine(bert, held_out, layer, converted),
        held_out_cosine(bert, held_out, layer, fit.module),
        held_out_diversity(held_out, layer, converted),
        held_out_diversity(held_out, layer, fit.module),
        len(held_out),
        held_out_error(original, converted, held_out, layer),
        held_out_error(original, fit.module, held_out, layer),
        held_out_cosine(bert, held_out, layer),
    )
