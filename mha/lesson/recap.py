"""The lesson's recap in words: the check question answered from check.Answer, and why production
models share K and V instead, from the ladder's measures on the same layer (mha/analyses/ladder.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mha.analyses.ladder import size
from mha.lesson.answers import differ_words, signed, small

if TYPE_CHECKING:
    from mha.analyses.groups import GroupDiversity
    from mha.analyses.ladder import Baselines, RungMeasures
    from mha.lesson.check_question import Answer
    from mha.studies.verdict import Verdict


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
            f"({differ_words(ans.difference_shared, 'the maps')}): head diversity falls from "
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
    worth = "."
    if ans.identical and copies:
        worth = f"; what it loses is every head but one: the {ans.n_heads} heads write the same thing."
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
    task: str = "",
) -> str:
    """Why production models share K and V (MQA, GQA): each head keeps its own W_i^Q. `plain` and
    `scaled`: the ladder's rungs by name, pooled by the plain and the rescaled mean, measured inside
    layer `layer` on the learner's sentence; `task`: the verdict's words on the model's own task
    (mha.lesson.verdict.recap_words), or where to get them."""
    mha, mqa = plain["MHA"], plain["MQA"]
    return (
        f"**Why production models share K and V instead** (multi-query, Shazeer 2019; grouped-query, Ainslie "
        f"et al. 2023): each head keeps its own $W_i^Q$, so its question stays its own. "
        f"Were every layer MQA in a decoder of this shape, the K/V cache that generation reads "
        f"for every new token would shrink from {size(mha.kv_cache)} to {size(mqa.kv_cache)} per token. "
        + (task + " " if task else "")
        + "Inside one layer, on your sentence: converted to MQA without training (each K and V "
        f"mean-pooled into one, then rescaled to a slice's length), layer {layer}'s heads differ by "
        f"{scaled['MQA'].diversity:.3f} ({mqa.diversity:.3f} with the plain mean, whose smaller scores flatten every "
        f"map), against {mha.diversity:.3f} in {who}'s layer and {base.random_diversity:.3f} for random maps exactly "
        f"as sharp as {who}'s; one shared Q, K and V leaves 0. They differ, but not as before: each head's map "
        f"drifts {scaled['MQA'].drift:.3f} from its own map in {who}, "
        f"{scaled['MQA'].drift / mha.diversity:.0%} of the distance between two of {who}'s heads."
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
        f"memory: the K/V cache that generation reads for every new token is {size(own)} per token (fp16), against "
        f"{size(per_head)} with a K and V per head and {size(mqa)} with one for all (multi-query, Shazeer 2019)."
    )


def multi_query(
    who: str,
    n_heads: int,
    layer: int,
    diversity: float,
    random: float,
    cache: tuple[int, int],
    window: tuple[int, int, int] | None = None,
) -> str:
    """The real-world answer on a multi-query model: one K and V for every head, and how far its heads'
    maps still differ on the learner's sentence in `layer`, beside random maps as sharp as theirs;
    `cache`: K/V bytes per token as built and with a K and V per head; `window`: (W, sliding layers,
    bytes per token past W tokens, when only the full layers still grow), if it has sliding layers."""
    own, per_head = cache
    return (
        f"**What {who} answers.** It shares one $W^K$ and one $W^V$ among all {n_heads} query heads and keeps a "
        f"$W_i^Q$ per head (multi-query attention, Shazeer 2019). Its heads still differ, measured: on your sentence "
        f"in layer {layer} they differ by {diversity:.3f} (mean JS, nats), against {random:.3f} for random maps "
        f"exactly as sharp as theirs and 0 for identical maps; only their queries set them apart. What the sharing "
        f"buys is memory: the K/V cache that generation reads for every new token is {size(own)} per token (fp16), "
        f"against {size(per_head)} with a K and V per head"
        + (
            f"; past {window[0]:,} tokens its {window[1]} sliding-window layers stop growing, and each further token "
            f"adds only {size(window[2])}."
            if window
            else "."
        )
    )


def further(
    v: Verdict | None,
    plain: dict[tuple[int, int, int], RungMeasures],
    scaled: dict[tuple[int, int, int], RungMeasures],
    n_heads: int,
    who: str = "BERT",
    kv_groups: int | None = None,
) -> str:
    """Why sharing K and V alone (MQA) can cost the model more than sharing Q, K and V: said only where
    the verdict's held-out task says so (every layer converted, either pooling: MQA surely worse than
    one shared Q, K, V), with the drifts measured on the learner's sentence (rungs by their projection
    counts, ladder.Rung.heads); "" otherwise. kv_groups: the model's own K/V projections (fewer than
    n_heads: a grouped-query model, whose heads of one group already share their key)."""
    from mha.lesson import verdict as words
    from mha.studies.verdict import CONVERTED, UPTRAINED

    if v is None:
        return ""
    H = n_heads
    G = H if kv_groups is None else kv_groups
    pair = (  # what a query was trained against: its own key, or its K/V group's
        ("its K/V group's $W^K$", "another group's keys", f"a key averaged over all {G} groups")
        if G < H
        else ("its own $W_i^K$", "another head's keys", "a key averaged over all heads")
    )
    for pooling, rungs in ((words.SCALED, scaled), (words.PLAIN, plain)):
        a, b = v.find(CONVERTED, "MQA", pooling), v.find(CONVERTED, "shared Q/K/V", pooling)
        mqa, one = rungs.get((H, 1, 1)), rungs.get((1, 1, 1))
        if a is None or b is None or mqa is None or one is None:
            continue
        c = v.change(b, a)  # MQA minus shared Q/K/V
        if words.better(v, c) != -1:
            continue
        other = [  # the same two rungs under the other pooling, and uptrained: the order may not hold there
            (name, twins)
            for name, kind, p in (
                ("with the other pooling", CONVERTED, words.PLAIN if pooling == words.SCALED else words.SCALED),
                ("uptrained", UPTRAINED, words.PLAIN),
            )
            if None not in (twins := (v.find(kind, "MQA", p), v.find(kind, "shared Q/K/V", p)))
        ]
        holds = [f"{name}, {words.chain(v, list(twins))}" for name, twins in other]
        return (
            f"**Why can sharing less cost more?** On {who}'s own task, {words.held_out(v)}, with every layer "
            f"converted ({pooling}), MQA (K and V shared) scores {words.fmt(v, v.score(a))} and one shared Q, K and V "
            f"{words.fmt(v, v.score(b))} (change {signed(c.change)}, 90 % interval {signed(c.low)} to "
            f"{signed(c.high)}). A head's $W_i^Q$ and {pair[0]} are learned as a pair, for each other: {pair[1]} "
            f"live in coordinates its queries were never trained against. MQA scores each head's own query "
            f"against {pair[2]}; on your sentence its maps drift {mqa.drift:.3f} from the heads' own maps in this "
            "layer. Pooling Q too scores the average query against the average key: one map for every head, "
            + (
                f"which drifts less from each head's own ({one.drift:.3f})."
                if one.drift < mqa.drift
                else f"drifting {one.drift:.3f} from each head's own: here the maps alone do not explain the order."
            )
            + (f" This order belongs to this conversion ({pooling}, untrained): {'; '.join(holds)}." if holds else "")
        )
    return ""


def which_differ(
    plain: list[RungMeasures],
    scaled: list[RungMeasures],
    base: Baselines,
    who: str,
    layer: int,
    map_tex: str = r"\mathrm{softmax}(Q_i K_i^\top / \sqrt{d_k})",
) -> str:
    """Which of Q, K, V must differ for heads to differ, on the learner's sentence: the model's
    diversity and its random floor, MQA's and shared Q's (both poolings), the drift, and which rungs
    make every head's map the same (the rungs in ladder order, the model's own first)."""
    from mha.analyses.collapse import SAME_TOLERANCE

    H = plain[0].rung.n_heads
    G = plain[0].rung.heads[1]
    by, by_s = {m.rung.heads: m for m in plain}, {m.rung.heads: m for m in scaled}
    bert = plain[0].diversity
    mqa, q_only, mqa_s, q_only_s = by[(H, 1, 1)], by[(1, G, G)], by_s[(H, 1, 1)], by_s[(1, G, G)]
    identical = [m.rung.name for m in plain if m.diversity < SAME_TOLERANCE]
    share_qk = [m.rung.name for m in plain if m.rung.same_attention]
    if G == 1:  # the model already shares K and V: only its W_i^Q set its heads apart
        one = by[(1, 1, 1)]
        return (
            f"On your sentence, {who}'s {H} heads in layer {layer} differ by {bert:.3f} (mean JS, nats; random maps "
            f"exactly as sharp as theirs differ by {base.random_diversity:.3f}, identical maps by 0). {who} already "
            f"shares one K and one V (multi-query attention): a head's map is ${map_tex}$, so its own $W_i^Q$ alone "
            f"sets it apart. Sharing $W^Q$ too (shared Q/K/V, the one rung below) leaves {one.diversity:.3f}: one "
            f"map for all {H} heads."
        )
    return (
        f"On your sentence, {who}'s {H} heads in layer {layer} differ by {bert:.3f} (mean JS, nats; random maps "
        f"exactly as sharp as theirs differ by {base.random_diversity:.3f}, identical maps by 0). Sharing **K and "
        f"V** (MQA) leaves {mqa_s.diversity:.3f} ({mqa_s.diversity / bert:.0%} of it) when the pooled K and V keep "
        f"a slice's length, and {mqa.diversity:.3f} ({mqa.diversity / bert:.0%}) with the plain mean; sharing **Q "
        f"alone** leaves {q_only_s.diversity:.3f} ({q_only_s.diversity / bert:.0%}), or {q_only.diversity:.3f} "
        f"({q_only.diversity / bert:.0%}) with the plain mean. Diversity counts how far apart the heads are, "
        "not whether they still attend as before: each MQA head's map drifts "
        f"{mqa_s.drift:.3f} from its own map in {who} ({mqa.drift:.3f} with the plain mean), "
        f"{mqa_s.drift / bert:.0%} of the distance between two of {who}'s heads. "
        + (
            "Most of what the plain mean takes from MQA's diversity is scale: its shorter K shrinks every score, and "
            "the maps flatten towards one another. "
            if mqa_s.diversity - mqa.diversity > 0.5 * (bert - mqa.diversity)
            else ""
        )
        + (
            f"Only the rungs that share **both Q and K** ({', '.join(share_qk)}) make every "
            f"head compute the same map (diversity below {SAME_TOLERANCE:.0e}): a head's map is ${map_tex}$, so "
            + (
                "a $W^Q$ of its own *or* a $W^K$ of its own for each head is enough to keep the maps apart."
                if G == H
                else f"a $W^Q$ of its own for each head keeps all {H} maps apart; with one $W^Q$, the {H // G} heads "
                f"of a K/V group read one query and one key, and compute one map: {G} maps for {H} heads."
            )
            if identical == share_qk
            else f"Identical maps (diversity below {SAME_TOLERANCE:.0e}): {', '.join(identical) or 'none'}."
        )
    )


def q_only(q_alone: RungMeasures, model: RungMeasures, who: str) -> str:
    """Why sharing only W^Q can raise head diversity, said where it did on the learner's sentence: each
    diversity beside random maps exactly as sharp as its own maps (RungMeasures.random_diversity), and
    the drift of each head's map from its own."""
    if q_alone.diversity <= model.diversity:
        return ""
    mine, theirs = model.diversity / model.random_diversity, q_alone.diversity / q_alone.random_diversity
    return (
        f"**Why does sharing $W^Q$ alone raise the diversity?** Here ({q_alone.rung.pooling}) it went from "
        f"{model.diversity:.3f} to {q_alone.diversity:.3f}. More diversity is not more specialisation. {who}'s heads "
        f"differ {mine:.0%} as much as random maps exactly as sharp as theirs ({model.random_diversity:.3f}); with "
        f"one $W^Q$ they differ {theirs:.0%} as much as random maps as sharp as theirs "
        f"({q_alone.random_diversity:.3f}), "
        + (
            "closer to random: one query, trained for no head's keys, scores each head's own keys, and the heads lose "
            "part of what they had in common"
            if theirs > mine
            else "no closer to random"
        )
        + f". Each head's map drifts {q_alone.drift:.3f} from its own map in {who}, "
        f"{q_alone.drift / model.diversity:.0%} of the distance between two of {who}'s heads."
    )


def residual(base: Baselines, layer: int, cosine: str, pre_norm: bool = True) -> str:
    """Why the cosines of the last states cannot rank the rungs: the residual stream, measured.
    pre_norm (Traits.pre_norm): the sum carries on as it is; post-norm: it is normalised first."""
    kept = base.sentence_cosine
    carry = (
        "which carry on unchanged"
        if pre_norm
        else "and the sum is then normalised (post-norm LayerNorm), which rescales it but keeps the states in it"
    )
    return (
        "The cosines are secondary. Each layer adds its attention's output to the residual stream, the states "
        f"entering it, {carry}: on your sentence, layer {layer}'s attention adds a vector "
        f"{base.residual_ratio:.0%} as long as the residual it joins (mean over tokens), and every later layer "
        "adds its own. "
        + (
            f"So the {cosine} stays near 1 whatever one layer's attention does: removing it keeps {kept:.3f}, and "
            "these cosines cannot rank the rungs; the task above can."
            if kept is not None and kept >= 0.9
            else f"Removing that attention keeps a {cosine} of {kept:.3f}: read each cosine beside that baseline; the "
            "task above ranks the rungs."
            if kept is not None
            else "The task above ranks the rungs."
        )
    )
