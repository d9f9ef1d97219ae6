"""The three real models side by side (mha.analyses.side_by_side) as a table and in words, each
sentence made from the rows' numbers and structures, never from a model's name."""

from __future__ import annotations

from mha.studies.side_by_side import ModelRow

SHARED = "shared Q/K/V"  # the one rung below every model's own, on every ladder
FLAT = 1e-3  # nats: random maps as sharp as the heads' own differ by less only when the maps are nearly flat


def _num(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _kept(row: ModelRow, rung: str) -> str:
    """A rung's kept share, converted → uptrained; the model's own structure keeps all of it."""
    if rung == row.structure:
        return "the model itself"
    k = next((k for k in row.kept if k.rung == rung), None)
    if k is None:
        return "—"
    return f"{k.converted:.0%}" + ("" if k.uptrained is None else f" → {k.uptrained:.0%}")


def table(rows: list[ModelRow]) -> list[dict[str, str]]:
    """One row per model: its structure, its heads' diversity beside random maps as sharp, within and
    across K/V heads, its K/V heads' overlap beside random subspaces, and its verdict."""
    return [
        {
            "model": f"{r.name} ({r.structure})",
            "query / K/V heads, d_k": f"{r.n_heads} / {r.kv_heads}, {r.d_head}",
            "head diversity (JS)": _num(r.diversity),
            "random maps as sharp": _num(r.random_maps),
            "within a K/V head": _num(r.within),
            "across K/V heads": _num(r.across),
            "W^K overlap across K/V heads": _num(r.k_overlap, 2),
            "W^V overlap": _num(r.v_overlap, 2),
            "random subspaces": _num(r.random_overlap, 2),
            "task: model / every head removed": f"{r.model_score:.3f} / {r.removed_score:.3f} ({r.score_name})",
            "kept by MQA": _kept(r, "MQA"),
            f"kept by {SHARED}": _kept(r, SHARED),
        }
        for r in rows
    ]


def _than(a: float, b: float) -> str:
    """a against b as a ratio in words: "1.9 times" or "0.62 of"."""
    return f"{a / b:.1f} times" if a >= b else f"{a / b:.2f} of"


def words(rows: list[ModelRow]) -> list[str]:
    """One sentence per measure, each model's numbers beside its own baseline."""
    diversity = "; ".join(
        f"{r.who} {r.diversity:.3f} against {r.random_maps:.3f}"
        + (
            f" ({_than(r.diversity, r.random_maps)} the baseline)"
            if r.random_maps > FLAT
            else " (flat maps: shuffled, they stay alike, so 0 here says nothing about the heads)"
        )
        for r in rows
    )
    groups = []
    for r in rows:
        if r.within is None:
            groups.append(f"no two of {r.who}'s heads read one K/V head")
        elif r.across is None:
            groups.append(
                f"every pair of {r.who}'s heads reads its one K/V head, and they still differ by {r.within:.3f}, from "
                "$W_i^Q$ alone"
            )
        else:
            closer = "closer" if r.within < r.across else "no closer"
            groups.append(
                f"{r.who}'s heads that read one K/V head differ by {r.within:.3f}, against {r.across:.3f} across K/V "
                f"heads: {closer}"
            )
    overlap = []
    for r in rows:
        if r.k_overlap is None:
            overlap.append(f"{r.who} has one K/V head: no two to compare")
        else:
            overlap.append(
                f"{r.who}'s $W^K$ {r.k_overlap:.2f} and $W^V$ {r.v_overlap:.2f} against {r.random_overlap:.2f} for "
                f"random subspaces of {r.d_head} of {r.d_model} dimensions"
            )
    kept = []
    for r in rows:
        k = next((k for k in r.kept if k.rung == SHARED), None)
        if k is not None:
            kept.append(
                f"{r.who} {k.converted:.0%} converted"
                + ("" if k.uptrained is None else f", {k.uptrained:.0%} uptrained")
            )
    return [
        "**Head diversity**, mean over layers, pairs of heads and the pool's sentences, beside random maps as sharp "
        f"as each model's own: {diversity}.",
        f"**Within and across K/V heads**: {'; '.join(groups)}.",
        f"**K/V overlap** across K/V heads, mean cos² of the principal angles: {'; '.join(overlap)}.",
        f"**The task**: one {SHARED} in every layer keeps this share of what attention adds to each model's own "
        f"task: {'; '.join(kept)}.",
    ]
