"""The lesson's recap in words: the check question answered from check.Answer, and why production
models share K and V instead, from the ladder's measures on the same layer (mha/analyses/ladder.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mha.lesson.answers import small

if TYPE_CHECKING:
    from mha.analyses.groups import GroupDiversity
    from mha.analyses.ladder import Baselines, RungMeasures, UptrainOutcome
    from mha.lesson.check_question import Answer


def sharing(
    ans: Answer, layer: int, who: str = "BERT", across: dict[str, float] | None = None, floor: float | None = None
) -> str:
    """What one shared W^Q, W^K, W^V did to layer `layer` of model `who`: identical heads (or not,
    said with the measured difference), diversity, subspace overlaps, effective heads, the map
    left, parameters. `across`: a grouped model's K and V overlaps across its K/V groups (within
    a group they are 1 by construction and count in the means), said beside `floor`, the overlap
    of random subspaces of the same size (metrics.random_overlap)."""
    copies = ans.heads_shared < 1.05
    if ans.identical:
        opening = (
            f"**If every head of layer {layer} shares one $W^Q, W^K, W^V$, every head computes the same attention** "
            f"(the maps differ by at most {small(ans.difference_shared)}): head diversity falls from "
            f"{ans.diversity_bert:.3f} to {small(ans.diversity_shared)} nats"
        )
    else:
        opening = (
            f"With one shared $W^Q, W^K, W^V$ the heads' maps still differ by up to {ans.difference_shared:.2f}; head "
            f"diversity goes from {ans.diversity_bert:.3f} to {small(ans.diversity_shared)} nats"
        )
    key = "subspace overlap W^{}".format  # every role's overlap, whichever roles the path shares
    overlaps = ", ".join(f"{ans.bert[key(r)]:.2f} → {ans.shared[key(r)]:.2f}" for r in "QKV")
    if across:
        overlaps += (
            f" (the heads of one K/V group read one $W^K$ and one $W^V$: their overlap is 1 by construction and "
            f"counts in these means; across groups {who}'s are $W^K$ {across['k']:.2f} and $W^V$ {across['v']:.2f}, "
            f"against {floor:.2f} for random subspaces of the same size)"
        )
    flatter = f", much flatter than {who}'s heads" if ans.flat else ""
    worth = ", and buys nothing with them: the heads write the same thing." if ans.identical and copies else "."
    return (
        f"{opening}. The heads' subspaces overlap {overlaps} ($W^Q, W^K, W^V$; 1 = one subspace), and the effective "
        f"number of heads goes from {ans.heads_bert:.1f} to {ans.heads_shared:.1f}"
        + (f": {ans.n_heads} copies of one head" if copies else "")
        + f"; the map left has score spread {ans.spread_shared:.2f} ({who}'s heads: {ans.spread_bert:.2f}) and entropy "
        f"{ans.entropy_shared:.2f} of $\\ln T$ ({who}'s: {ans.entropy_bert:.2f}){flatter}. Sharing saves "
        f"{ans.params_saved:,.0f} of the layer's {ans.params_distinct:,.0f} parameters{worth}"
    )


def production(
    layer: int,
    plain: dict[str, RungMeasures],
    scaled: dict[str, RungMeasures],
    base: Baselines,
    who: str = "BERT",
    cosine: str = "sentence embedding cosine",
) -> str:
    """Why production models share K and V (MQA, GQA): each head keeps its own W_i^Q. `plain` and
    `scaled`: the ladder's rungs by name, pooled by the plain and the rescaled mean; without their
    sentence cosines (not run: a long sentence before its button) the paragraph leaves them out."""
    mha, mqa = plain["MHA"], plain["MQA"]
    whole = (
        f"Layer {layer} alone converted without training keeps a {cosine} of "
        f"{scaled['MQA'].sentence_cosine:.3f} to {who}'s as MQA with the pooled K and V rescaled "
        f"({mqa.sentence_cosine:.3f} plain mean), and {scaled['shared Q/K/V'].sentence_cosine:.3f} with one shared "
        f"Q, K and V ({plain['shared Q/K/V'].sentence_cosine:.3f} plain); removing that layer's attention keeps "
        f"{base.sentence_cosine:.3f}. One sentence is not enough to rank these untrained conversions against each "
        "other or against removing the attention: their order changes from sentence to sentence. "
        if mqa.sentence_cosine is not None and base.sentence_cosine is not None
        else f"What converting layer {layer} alone costs the whole model on your sentence waits for the button above. "
    )
    return (
        f"**Why production models share K and V instead** (multi-query, Shazeer 2019; grouped-query, Ainslie "
        f"et al. 2023): each head keeps its own $W_i^Q$, so its question stays its own. "
        f"Were every layer MQA in a decoder of this shape, the K/V cache that generation reads "
        f"for every new token would shrink from {mha.kv_cache:,} to {mqa.kv_cache:,} bytes per token. "
        + whole
        + "Converted to MQA without training (each K and V "
        f"mean-pooled into one, then rescaled to a slice's length), layer {layer}'s heads differ by "
        f"{scaled['MQA'].diversity:.3f} ({mqa.diversity:.3f} with the plain mean, whose smaller scores flatten every "
        f"map), against {mha.diversity:.3f} in {who}'s layer and {base.random_diversity:.3f} for random maps exactly "
        f"as sharp as {who}'s; one shared Q, K and V leaves 0. They differ, but not as before: each head's map "
        f"drifts {scaled['MQA'].drift:.3f} from its own map in {who}, "
        f"{scaled['MQA'].drift / mha.diversity:.0%} of the distance between two of {who}'s heads. Whether a short "
        "training makes the converted layer work again is measured on held-out sentences on *What may be shared*."
    )


def uptrained(o: UptrainOutcome | None) -> str:
    """The last MQA or GQA uptraining on this server, or where to run one."""
    if o is None:
        return (
            "How much of that a short uptraining wins back is measured on *What may be shared*: none has run on "
            "this server for this model yet."
        )
    return (
        f"After uptraining on this server ({o.rung.name}, {o.rung.pooling}, layer {o.layer} alone, "
        f"{len(o.fit.losses):,} steps), {o.held_out_sentences} held-out sentences keep a cosine of "
        f"{o.held_out_before:.3f} → {o.held_out_after:.3f} (that layer's attention removed: {o.removed_cosine:.3f})."
    )


def grouped(
    who: str,
    n_heads: int,
    kv_heads: int,
    layer: int,
    mine: tuple[float, float],
    pool: GroupDiversity,
    cache: tuple[int, int, int],
) -> str:
    """The real-world answer on a grouped-query model: what it shares (K and V in groups, never Q)
    and that its heads still differ, measured: `mine` (within, across) on the learner's sentence in
    `layer`, `pool` over the bundled sentences; `cache`: K/V bytes per token as it is, with a K and
    V per head, and with one K and V (MQA)."""
    within, across = mine
    own, per_head, mqa = cache
    return (
        f"**What today's decoders answer.** {who} shares $W^K$ and $W^V$, never $W^Q$: its {n_heads} query heads "
        f"read {kv_heads} keys and values, one per group of {n_heads // kv_heads} (grouped-query attention, Ainslie "
        f"et al. 2023; so do Llama 2 70B and Llama 3, while Llama 1 and Llama 2 7B and 13B keep a K and V per "
        f"head). Its heads still differ, measured: on your sentence in layer "
        f"{layer}, two heads of one group differ by {within:.3f} (mean JS, nats) and two heads of different groups by "
        f"{across:.3f}; over the {pool.texts} bundled sentences, heads of one group are more alike in "
        f"{pool.layers_more_alike} of {len(pool.within)} layers, yet still differ, on average over the layers, "
        f"{pool.within.mean() / pool.across.mean():.0%} as much as two heads of different groups. What the sharing "
        f"buys is "
        f"memory: the K/V cache that generation reads for every new token is {own:,} bytes per token (fp16), against "
        f"{per_head:,} with a K and V per head and {mqa:,} with one for all (multi-query, Shazeer 2019)."
    )


FURTHER = 0.005  # how much lower MQA's cosine must be for recap.further to explain it


def further(
    plain: dict[tuple[int, int, int], RungMeasures],
    scaled: dict[tuple[int, int, int], RungMeasures],
    n_heads: int,
    who: str = "BERT",
    cosine: str = "sentence cosine",
    kv_groups: int | None = None,
) -> str:
    """Why sharing K and V alone (MQA) can move the model's output further than sharing Q, K and V:
    said only where it did on the learner's sentence, with either pooling (rungs by their
    projection counts, ladder.Rung.heads); "" otherwise or before the whole model has run.
    kv_groups: the model's own K/V projections (fewer than n_heads: a grouped-query model, whose
    heads of one group already share their key)."""
    H = n_heads
    G = H if kv_groups is None else kv_groups
    pair = (  # what a query was trained against: its own key, or its K/V group's
        ("its K/V group's $W^K$", "another group's keys", f"a key averaged over all {G} groups")
        if G < H
        else ("its own $W_i^K$", "another head's keys", "a key averaged over all heads")
    )
    for pooling, rungs in (("rescaled to a slice's length", scaled), ("left as the plain mean", plain)):
        mqa, one = rungs.get((H, 1, 1)), rungs.get((1, 1, 1))
        if mqa is None or one is None or mqa.sentence_cosine is None or one.sentence_cosine is None:
            continue
        if mqa.sentence_cosine > one.sentence_cosine - FURTHER:  # a gap the 3 decimals shown can tell apart
            continue
        return (
            f"**Why can sharing less move the output further?** With the pooled projections {pooling}, MQA (K and "
            f"V shared) keeps a {cosine} of {mqa.sentence_cosine:.3f} to {who}'s, one shared Q, K and V "
            f"{one.sentence_cosine:.3f}. A head's $W_i^Q$ and {pair[0]} are learned as a pair, for each other: "
            f"{pair[1]} live in coordinates its queries were never trained against. MQA scores each head's own "
            f"query against {pair[2]}, and its maps drift {mqa.drift:.3f} from the heads' own "
            "maps. Pooling Q too scores the average query against the average key: one map for every head, "
            + (
                f"which drifts less from each head's own ({one.drift:.3f})."
                if one.drift < mqa.drift
                else f"drifting {one.drift:.3f} from each head's own: here the maps alone do not explain the order."
            )
        )
    return ""
