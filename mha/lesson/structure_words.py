"""A model's structure in the words and formulas the pages show, made from its traits
(mha/models/traits.py), so that no sentence written for one structure reaches another: who shares
K and V with whom, d_k, the scale on the scores, and what a causal (or sliding-window) token reads."""

from __future__ import annotations

from mha.models.traits import Traits


def kv_sharing(t: Traits) -> str:
    """Whose W^K and W^V the query heads read, in words ("" when every head has its own)."""
    if not t.grouped:
        return ""
    if t.kv_groups == 1:
        return f"all {t.n_heads} query heads read one $W^K$ and one $W^V$ (multi-query attention, Shazeer 2019)"
    return (
        f"its {t.n_heads} query heads share $W^K$ and $W^V$ within {t.kv_groups} groups of {t.group_size} heads "
        "(grouped-query attention, Ainslie et al. 2023)"
    )


def d_k_tex(t: Traits) -> str:
    """How d_k is set, in LaTeX: d_k = d_model / h, or the model's own head size beside it."""
    if t.head_dim is None or t.head_dim * t.n_heads == t.d_model:
        return r"d_k = d_{model}/h"
    return rf"d_k = {t.d_head}\ (\text{{set by the model: }} h\,d_k = {t.heads_width} \ne d_{{model}} = {t.d_model})"


def scale_tex(t: Traits) -> str:
    r"""What multiplies Q K^T, in LaTeX, after the product: "/ \sqrt{d_k}", or the model's own factor."""
    return r"/ \sqrt{d_k}" if t.scale_is_standard else rf"\cdot {t.scale:.4g}"


def scores_tex(t: Traits) -> str:
    r"""A head's scaled scores in LaTeX, with the key it reads and the model's scale: Q_i K_i^T / \sqrt{d_k},
    Q_i K_{g(i)}^T for K/V groups, Q_i K^T for one K/V head."""
    key = "K" if t.kv_groups == 1 < t.n_heads else "K_{g(i)}" if t.grouped else "K_i"
    return rf"Q_i {key}^\top {scale_tex(t)}"


def map_tex(t: Traits) -> str:
    """A head's map in LaTeX: the softmax of scores_tex."""
    return rf"\mathrm{{softmax}}({scores_tex(t)})"


def reads(t: Traits, n_tokens: int) -> str:
    """What a token reads, in words ("" for an encoder): itself and the tokens before it, and, on a
    sentence longer than a sliding window, only the last W of them in the sliding layers."""
    if not t.causal:
        return ""
    said = "a token reads only itself and the tokens before it (a causal mask)"
    windows = sorted({w for w in (t.windows or ()) if w is not None and w < n_tokens})
    if windows:
        W = ", ".join(f"{w:,}" for w in windows)
        said += (
            f"; in its {len(t.sliding_layers)} sliding-window layers, only the last {W} of them (itself included), "
            f"and your sentence has {n_tokens:,} tokens"
        )
    return said


def diagram_args(t: Traits) -> dict:
    """The keyword arguments of mha.lesson.diagram's stages_dot and stages_text for this structure: its
    own head size, its sliding window (the largest, if any layer has one) and its score scale."""
    return {"d_head": t.d_head, "window": t.widest_window, "scale": t.score_scale}


def key_of(traits: Traits, head: int) -> str:
    """The W^K a head reads, in LaTeX: its own W_i^K, or its K/V group's shared one."""
    if traits.kv_groups == 1 < traits.n_heads:
        return "the one $W^K$ every head reads"
    if traits.grouped:
        return f"the $W^K$ of K/V group {head // traits.group_size}"
    return f"$W_{{{head}}}^K$"


def qk_words(traits: Traits) -> str:
    """Whose W^Q and W^K a head reads, in words (a hint's)."""
    if traits.kv_groups == 1 < traits.n_heads:
        return "its own $W_i^Q$ and the one $W^K$ every head reads"
    return "its own $W_i^Q$ and its group's shared $W^K$" if traits.grouped else "its own $W_i^Q$ and $W_i^K$"
