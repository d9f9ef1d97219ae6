"""Subspaces: where each head's lens puts the tokens of your sentence, and how sharing W^Q and W^K
folds every head's picture into one."""

import streamlit as st

import ui
from mha import plots
from mha.analyses import collapse, subspaces
from mha.analyses.groups import group_ranges
from mha.lesson import answers, structure_words

st.title("Subspaces: each head's own view of your sentence")
inp, run, model = ui.page_start()
st.markdown(
    f"Each head $i$ projects the token vectors with {structure_words.qk_words(model.traits)} into a small "
    "$d_k$-dimensional space: its **representation subspace**. There a query meets the keys: the larger their dot "
    "product (it grows "
    "with both points' length, not only with their direction), the more of the token's weight goes to that key. "
    "Below, every head's space is drawn in 2-D: the "
    "picture keeps as much of the head's scaled scores "
    f"${structure_words.scores_tex(model.traits)}$ "
    "as two dimensions can."
)
traits = model.traits
H, who, causal, first = model.n_heads, traits.who, traits.causal, traits.parking == "first"
c1, c2 = st.columns(2)  # one row: the panels start on the first screen of a 1280 x 720 projector
layer, _ = ui.layer_head(run, container=c1, head=False)
token = ui.token_picker("Token to follow", run.tokens, answers.content_token(run), "subspaces_token", container=c2)
path = ui.path_controls(H, "subspaces")
if path is None:
    st.stop()

with st.spinner("Projecting every head..."):
    maps = ui.cached_layer_maps(inp, layer, path)
    own = maps if path.alpha == 0.0 else ui.cached_layer_maps(inp, layer, collapse.CollapsePath(0.0))
ui.chart(
    plots.subspaces.subspace_panels(
        maps.queries,
        maps.keys,
        maps.fidelity,
        run.tokens,
        f"Layer {layer} at alpha = {path.alpha:.2f}: queries (●) and keys (◇) of every token, per head",
        token=token,
        weights=maps.weights,
        spread=maps.spread,
    ),
    key="subspaces_panels",
)
st.caption(
    f"A token has the same colour in every panel, by position (Viridis: dark purple = first of the "
    f"{run.n_tokens} tokens, yellow = last; repeats keep their own points). The ring is "
    f"“{plots.common.token_label(run.tokens[token])}” as a query; its lines go to the 3 keys "
    "it reads most in that head. **Fidelity** is the share of the head's scores the picture keeps: the "
    "dot product of a query point and a key point is the best two-dimensional match to their real scaled "
    "score (keys are centred first, which the softmax does not notice); 1 = exact. The grey cross marks 0 on both "
    "axes. Each panel has its own scale, so a weak head looks as large as a strong one: its **spread** (the standard "
    "deviation of the head's real scaled scores over the keys, mean over queries) says how strong it is. Near 0 the "
    f"head's map is flat; {who}'s own heads in this layer spread {own.spread.min():.2f} to {own.spread.max():.2f}."
    + (
        f" {who} is causal: a query meets only the keys at or before it, so the fidelity counts only those pairs "
        "(the picture is fitted to every pair)."
        if causal
        else ""
    )
    + (
        " Its queries and keys are rotated by position (RoPE) before they meet: the points are the rotated ones, as "
        "the scores use them."
        if traits.positions == "rotary"
        else ""
    )
    + (
        (
            f" Heads {group_ranges(H, maps.key_groups)} read one key projection per group here"
            if maps.key_groups > 1
            else " Every head reads one key projection here"
        )
        + ": each group's panels are drawn on common axes (the best 2-D fit of the group's scores together), so "
        "its keys sit at the same points in every panel of the group; the query points come from the $W^Q$ each "
        "head reads."
        if maps.key_groups < H
        else ""
    )
)
spread = subspaces.max_map_difference(maps)
if {"q", "k"} <= set(path.roles) and path.alpha == 1.0:
    st.success(
        f"$W^Q$ and $W^K$ shared: all {H} panels are the same picture (max difference between panels "
        f"{answers.small(spread)}). The heads look at the sentence through one lens, so they attend alike.",
        icon=":material/call_merge:",
    )
elif spread < collapse.SAME_WEIGHTS:
    st.info(f"All {H} panels are the same picture here (max difference between panels {answers.small(spread)}).")
else:
    st.info(
        f"{H} different pictures (two heads' coordinates differ by up to {spread:.2f}, "
        f"{spread / subspaces.longest_point(maps):.0%} of the longest point vector in any panel, in the pictures' "
        "units, where a query point times a key point is their scaled score; 0 would mean one picture): the same "
        "word lands in different places in each head. Turn on *Shared* with $W^Q$ and $W^K$ to fold them into one.",
        icon=":material/layers:",
    )

st.header("Play along alpha")
if ui.setting_widget("toggle", "Show the animation (11 pictures from distinct to shared)", "subspaces_play"):
    with st.spinner("Computing the pictures from distinct to shared..."):
        frames = ui.cached_alpha_frames(inp, layer, path)
    ui.chart(
        plots.subspaces.subspace_animation(
            [(a, m.queries, m.keys) for a, m in frames],
            run.tokens,
            f"Layer {layer}: {', '.join(f'W<sup>{r.upper()}</sup>' for r in 'qkv' if r in path.roles)} pulled "
            "from distinct (0) to shared (1)",
        ),
        key="subspaces_animation",
    )
    st.caption(
        "Press ▶ or drag the slider: the frames are all in your browser, so it plays without the server. Colours and "
        "markers as above (colour = position). Each frame "
        "is turned (rotated or mirrored, per head) to match the next one, from alpha = 1 backwards, by orthogonal "
        "Procrustes, which keeps every query-key dot product: a point moves only where the head's scores change, not "
        "because a new 2-D basis was picked. (So the first frame may be the picture above turned or mirrored.)"
    )

st.header("Many sentences, one picture per head")
if ui.setting_widget("toggle", f"Show your sentence among {len(subspaces.pool_sentences())} others", "subspaces_many"):
    with st.spinner(f"Running {len(subspaces.pool_sentences())} more sentences through the model (once)..."):
        pool, pool_maps = ui.cached_pool(inp, layer)
    own = pool.sentence == 0
    ui.chart(
        plots.subspaces.pool_panels(
            pool_maps.queries,
            pool_maps.keys,
            pool_maps.fidelity,
            pool.tokens,
            subspaces.token_kinds(pool.tokens, pool.position if first else None),
            pool.position,
            own,
            f"Layer {layer} ({who}'s own weights): your sentence (large) and "
            f"{pool.sentence.max()} bundled ones, {len(pool.tokens)} tokens",
            special="first tokens" if first else ", ".join(traits.special_tokens),
        ),
        key="subspaces_pool",
    )
    st.caption(
        "As AttentionViz does for a corpus: the same picture over many sentences shows what a head's space is "
        "organised by. The picture is fitted to every query-key pair of the pool, also to pairs from different "
        "sentences that no softmax compares; the **fidelity** in each panel counts only the pairs within a sentence "
        + ("whose key is at or before its query " if causal else "")
        + "(the share of their scores' energy the picture keeps). "
        + "Words are coloured by where they sit in their sentence (start to end); "
        + ("each sentence's first token" if first else "/".join(traits.special_tokens))
        + " and punctuation have their own colours. A head whose words fan out by colour reads position; one that "
        + ("gathers the first tokens apart" if first else "gathers the special tokens apart")
        + " treats them as a place to park attention."
    )

st.header("The weights themselves")
spectra = ui.cached_spectra(inp.model, layer)
ui.chart(
    plots.subspaces.spectra_chart(
        spectra.per_head,
        {
            "stacked W^Q": spectra.query,
            "stacked W^K": spectra.key,
            "W^Q: its heads' spectra, random directions": spectra.query_rotated,
            "W^K: its heads' spectra, random directions": spectra.key_rotated,
        },
        spectra.reference,
        key="W<sup>K</sup>" if traits.kv_groups == 1 else "W<sup>K</sup><sub>g(i)</sub>" if traits.grouped else None,
    ),
)
C, D = model.d_model, model.traits.d_head
key = "W^K" if traits.kv_groups == 1 else "W^K_{g(i)}" if traits.grouped else "W_i^K"  # whose W^K a head reads
normed = (  # a per-head norm sits between the projections and the score: its weights are counted in
    " (with the query and key norms' weights $1 + w$ between them; each token's own RMS also scales its scores, "
    "which no spectrum shows)"
    if traits.qk_norm is not None
    else ""
)
st.caption(
    f"Left: each head's $W_i^Q {{{key}}}^\\top$ ({C} x {C}){normed} has at most $d_k$ = {D} directions. Right: "
    "stacked side by "
    f"side, the {H} heads' $W^Q${' (norm weights included, as on the left)' if normed else ''} need "
    f"{spectra.energy_rank('query')} of {C} directions for 90 % of their "
    f"energy, $W^K$ {spectra.energy_rank('key')}"
    + (
        f" (its one K/V projection: {D} rows)"
        if traits.kv_groups == 1
        else f" (its {model.traits.kv_groups} K/V groups' projections: {model.traits.kv_groups * D} rows)"
        if traits.grouped
        else ""
    )
    + f" (a random {H * D} x {C} matrix: {spectra.energy_rank('reference')}). The fair "
    "comparison keeps each head's own singular values and points them in random directions: "
    f"{spectra.energy_rank('query_rotated')} for $W^Q$"
    + (
        f", {spectra.energy_rank('key_rotated')} for $W^K$. "
        if traits.kv_groups > 1
        else " ($W^K$ is one projection: rotating it keeps its spectrum, so it has nothing to compare). "
    )
    + (
        ("The real stack needs fewer" if traits.kv_groups == 1 else "The real stacks need fewer")
        + ": beyond their uneven spectra, the heads share directions "
        if spectra.energy_rank("query") < spectra.energy_rank("query_rotated")
        and (traits.kv_groups == 1 or spectra.energy_rank("key") < spectra.energy_rank("key_rotated"))
        else "The real stacks need no fewer: no sign here that the heads share directions beyond their uneven spectra "
    )
    + "(Cordonnier et al. 2020, *Multi-Head Attention: Collaborate Instead of Concatenate*, found them shared)."
    + (
        " With rotary positions a rotation by the two tokens' distance sits between $W_i^Q$ and $W^K$: the product "
        "is the score matrix of two tokens at the same position."
        if traits.positions == "rotary"
        else ""
    )
)
st.page_link(
    "app_pages/collapse.py", label="The same sharing, measured: the collapse page", icon=":material/call_merge:"
)
ui.words(
    "representation subspace",
    "fidelity",
    "score spread",
    "alpha",
    "subspace overlap",
    *(("rotary position embeddings",) if traits.positions == "rotary" else ()),
    *(("causal mask",) if causal else ()),
)
