"""The lesson: the seven points of multi-head attention in order, each done by the learner on the
real model, with a question checked against the numbers the engine computed for their sentence."""

import streamlit as st

import ui
from mha import atlas, build, collapse, diagram, lesson, metrics, plots, subspaces

N = len(lesson.STEPS)
inp, run, model = ui.page_start()
T, C, H, L = run.n_tokens, model.d_model, model.n_heads, model.n_layers
D = C // H
ss = st.session_state
if not 1 <= int(ss.get("step", 1)) <= N:
    ui.notice(f"The lesson has steps 1 to {N}: starting at step 1.")
    ss["step"] = 1
ui.show_notices()
step = int(ss["step"])
tag = ui.question_tag(inp, step)


def go(to: int) -> None:
    st.session_state["step"] = to
    st.session_state["lesson_moves"] = st.session_state.get("lesson_moves", 0) + 1  # each move opens at the top
    ui.scroll_here_done()


def tool(page: str, label: str, layer: int | None = None, head: int | None = None) -> None:
    """A link that opens a tool page with the same sentence, layer and head."""
    params = {"text": inp.text, "model": inp.model}
    params |= {"layer": str(layer)} if layer is not None else {}
    params |= {"head": str(head)} if head is not None else {}
    st.page_link(page, label=label, icon=":material/open_in_new:", query_params=params)


ui.scroll_top(f"lesson-{ss.get('lesson_moves', 0)}")
head_row = st.columns([3, 1.4, 0.6])  # the last column stays empty: Streamlit's header sits over it
head_row[0].title("Lesson: multi-head attention")
score_box = head_row[1].empty()  # filled at the end of the run, after this run's answers
st.progress(step / N, text=f"Step {step} of {N}: {lesson.STEPS[step - 1]}")
ui.words(
    "head width",
    "representation subspace",
    "head diversity",
    "[CLS] and [SEP]",
    "effective number of heads",
    "Jensen-Shannon divergence",
    "nats",
    "score spread",
    "multi-query and grouped-query",
    "K/V cache",
    "mean pooling",
    "uptraining",
)

if step == 1:
    st.markdown(
        r"A head gives every token $i$ **one** set of weights over the sentence, "
        r"$\alpha_{ij} = \mathrm{softmax}_j\big(q_i \cdot k_j / \sqrt{d_k}\big)$, which sums to 1, and hands back "
        r"**one** weighted average $\sum_j \alpha_{ij} v_j$. Follow one token of your sentence through the "
        f"{L * H} heads of {inp.model} ({L} layers x {H} heads) and see where each sends it."
    )
    try:
        default_query, rule = lesson.query_rule(run.tokens)
    except ValueError as e:  # no content word: nothing to follow
        st.info(f"This step follows one word: {e}. Type a longer sentence, or press *Next*.")
        default_query = None
if step == 1 and default_query is not None:
    pick, why_pick = st.columns([1, 1.6], vertical_alignment="bottom")
    query = ui.token_picker("Token to follow (the query)", run.tokens, default_query, "lesson_query", container=pick)
    word = plots.common.token_label(run.tokens[query])
    why_pick.caption(
        f"Chosen by a rule: {rule}. Pick any other token."
        if query == default_query
        else f"Your pick (the rule, {rule}, chose “{plots.common.token_label(run.tokens[default_query])}”)."
    )
    one = lesson.one_query(run, query)
    q = lesson.spread_question(run, one)
    answered = ui.choice_question(
        f"{tag}-spread",
        f"Predict first: a head may give one word more than half of “{word}”'s weight. How many different words of "
        f"your sentence get that from at least one of the {L * H} heads? ([CLS], [SEP] and punctuation, where heads "
        "park attention, do not count as words.)",
        q.options,
        q.answer,
        q.why,
        hint="Each head has its own $W_i^Q$ and $W_i^K$, so each scores the keys its own way; count the words that "
        "get more than half of some head's weight. Many heads park this token's weight on [CLS], [SEP] or "
        "punctuation instead, or spread it.",
        variant=str(query),
    )
    if answered is None:
        st.info("Answer first: the heads are shown after your prediction.", icon=":material/visibility_off:")
    else:
        k = min(4, len(one.targets))
        view = one.compare(run.attentions, k)
        labels = [f"layer {la}, head {he}" for la, he in view.heads]
        labels[-1] += " (best at all)"
        ui.chart(
            plots.lesson.query_rows(
                view.rows, labels, run.tokens, f"Where “{word}” looks, in {k} heads and the best compromise"
            ),
        )
        keys, on, specialist = view.keys, view.compromise, view.specialist
        st.caption(
            "Each row is one head's weights for this token (they sum to 1); colour: a cell's weight, number: the same "
            "in % (none under 5 %). "
            "Left out when finding where a head sends it: [CLS], [SEP] and punctuation, where heads park attention "
            "(step 5). "
            + (
                f"The first {k} rows are the strongest head for each of {k} different tokens "
                f"({', '.join(f'“{plots.common.token_label(run.tokens[t])}”' for t in keys)}). A single head "
                f"serving all {k} would have to split one distribution that sums to 1: the best any head does on "
                f"all {k} at once is the last row, with {on.min():.0%} on the weakest"
                + (f", against at least {specialist:.0%} from the specialist heads." if on.min() < specialist else ".")
                if k >= 2
                else "Among the words, every head gives its largest share of this token's weight to the same word: "
                "here the heads agree. Pick another token."
            )
        )
    tool("app_pages/atlas.py", "Rank every head for any two words: the link finder", *one.targets[0][1:3])

elif step == 2:
    st.markdown(
        r"Multi-head attention runs $h$ heads side by side in three stages. **Project**: each head $i$ has its own "
        r"$W_i^Q, W_i^K, W_i^V$ of size $d_{model} \times d_k$, with $d_k = d_{model}/h$: "
        r"$Q_i = X W_i^Q,\ K_i = X W_i^K,\ V_i = X W_i^V$. **Attend**: every head at once, "
        r"$\mathrm{head}_i = \mathrm{softmax}\big(Q_i K_i^\top / \sqrt{d_k}\big) V_i$. **Concatenate and mix**: "
        r"$\mathrm{MultiHead}(X) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h)\, W^O$. "
        f"Here $d_{{model}} = {C}$, $h = {H}$ and your sentence has $T = {T}$ tokens."
    )
    shapes = lesson.stage_shapes(run, model)
    answered = ui.number_question(
        f"{tag}-q",
        r"How big is one head's $Q_i$ for your sentence? (rows $\times$ columns)",
        ["rows", "columns"],
        shapes["Q_i"],
        f"One row per token (T = {T}) and $d_k = d_{{model}} / h$ = {C} / {H} = {D} columns: X ({T} x {C}) times "
        f"$W_i^Q$ ({C} x {D}).",
        hint=r"$Q_i = X W_i^Q$: X has one row per token and $d_{model}$ columns; $W_i^Q$ maps $d_{model}$ to $d_k$.",
    )
    if answered is None:
        st.info("Answer first: the diagram with every shape follows.", icon=":material/visibility_off:")
    else:
        ui.diagram(diagram.stages_dot(T, C, H), diagram.stages_text(T, C, H))
    tool("app_pages/build.py", "See every stage on your sentence: Build it from scratch")

elif step == 3:
    st.markdown(
        r"Every head $i$ multiplies the same token vectors by its $W_i^Q$ and $W_i^K$: queries and keys in a "
        r"$d_k$-dimensional space, where the dot product $q \cdot k$ decides who reads whom. Pick two heads of one "
        "layer and predict; then each head's space is drawn in 2-D (queries ●, keys ◇; the picture keeps as much of "
        "the head's scores as two dimensions can)."
    )
    layer, _ = ui.layer_head(run, head=False)
    c1, c2 = st.columns(2)
    a = ui.kept("selectbox", "First head", "lesson_head_a", c1, options=range(H), format_func=lambda h: f"head {h}")
    b = ui.kept("selectbox", "Second head", "lesson_head_b", c2, options=range(H), format_func=lambda h: f"head {h}")
    q = lesson.subspace_question(model, run, layer, a, b)
    answered = ui.choice_question(
        f"{tag}-sub",
        f"Will heads {a} and {b} place your tokens the same way?",
        q.options,
        q.answer,
        q.why,
        hint="A picture is drawn from one head's own $W_i^Q$ and $W_i^K$. Are the two heads' matrices the same?",
        variant=f"{layer}-{a}-{b}",
    )
    if answered is None:
        st.info("Predict first: the two pictures follow.", icon=":material/visibility_off:")
    else:
        maps = ui.cached_layer_maps(inp, layer, subspaces.BERT)
        pick = [a, b]
        ui.chart(
            plots.subspaces.subspace_panels(
                maps.queries[pick],
                maps.keys[pick],
                maps.fidelity[pick],
                run.tokens,
                f"Layer {layer}: heads {a} and {b}",
                heads=pick,
            ),
        )
        st.caption(
            "A token has one colour in both panels, by position (dark purple = first, yellow = last). Fidelity: the "
            "share of the head's scores the 2-D picture keeps (1 = exact)."
        )
    tool("app_pages/subspaces.py", "Every head's subspace, and how sharing folds them: Subspaces", layer)

elif step == 4:
    st.markdown(
        r"Each head returns a $T \times d_k$ matrix. The $h$ of them are joined side by side and multiplied by "
        r"$W^O$ ($d_{model} \times d_{model}$): every output dimension is a weighted sum over **every** head's "
        "dimensions, so the next layer gets one representation informed by all heads."
    )
    layer, _ = ui.layer_head(run, head=False)
    h2, d2 = lesson.other_split(H, C)
    answered = ui.number_question(
        f"{tag}-out",
        f"A what-if the page does not draw: the same layer with {h2} heads of $d_k = {d2}$ instead of {H} heads of "
        f"{D}. What shape would its output have for your sentence? (rows x columns)",
        ["rows", "columns"],
        lesson.stage_shapes(run, model)["output"],
        f"The concatenation is $T \\times (h \\cdot d_k)$: {h2} x {d2} = {C} columns, as {H} x {D} = {C}, and "
        "$W^O$ keeps that width. The output is $T \\times d_{model}$ whatever the number of heads, the width the "
        "layer started with, so layers can be stacked.",
        hint=r"Each head gives $T \times d_k$; $h$ of them side by side, then $W^O$ is $d_{model} \times d_{model}$.",
    )
    if answered is None:
        st.info("Answer first: the layer's concatenation and output follow.", icon=":material/visibility_off:")
    else:
        mixed = ui.kept("toggle", r"Show the output after $W^O$", "lesson_mixed")
        s = build.build_stages(model, run, layer, H)
        shown = s.tokens[:64]
        if mixed:
            ui.chart(
                plots.build.matrix_heatmap(s.trace.output[0, :64], shown, "Output = Concat W<sup>O</sup> + b"),
            )
        else:
            ui.chart(
                plots.build.matrix_heatmap(
                    s.trace.concat[0, :64],
                    shown,
                    "Concat(head_1, ..., head_h)",
                    boundaries=[h * D for h in range(1, H)],
                ),
            )
        st.caption("The lines mark where each head's slice starts; after $W^O$ there are no slices left.")
    tool("app_pages/build.py", "Every stage, step by step: Build it from scratch", layer)

elif step == 5:
    st.markdown(
        "Heads learn whatever helps the task; we can only look and build intuition. Clark et al. 2019 (*What Does "
        "BERT Look At?*) found heads that read the previous or the next token, heads that park their attention on "
        "[CLS] or [SEP], and heads that follow syntax; Kovaleva et al. 2019 sorted their patterns into vertical, "
        "diagonal and block shapes. This step is an exercise in reading a chart: below, every head coloured by how "
        "much it reads the previous token."
    )
    m = ui.cached_measures(inp)
    hover = atlas.hover_text(m)
    ui.chart(plots.atlas.atlas_heatmap(m["to previous"], hover, "Share of attention to the previous token"))
    q, best, vertical = lesson.previous_token_question(run)
    ui.choice_question(
        f"{tag}-prev",
        "Read it off the chart: which head reads the previous token most?",
        q.options,
        q.answer,
        q.why,
        hint="Hover the heads in the chart above: the brightest cell is the largest share.",
    )
    st.markdown("Now a head of your choice:")
    layer, head = ui.layer_head(run)
    st.info(atlas.describe(m, m["pattern"][layer, head], layer, head, run.n_tokens), icon=":material/psychology:")
    ui.chart(
        plots.heads.attention_heatmap(
            run.attentions[layer, head], run.tokens, f"Layer {layer}, head {head}", height=420
        ),
    )
    tool("app_pages/atlas.py", "Every measure of every head: Head atlas", *best)

elif step == 6:
    st.markdown(
        r"Someone proposes to save parameters by giving every head the **same** $W^Q, W^K, W^V$. "
        "Predict first, then try it on a real layer."
    )
    layer, _ = ui.layer_head(run, head=False)
    prediction = ui.kept(
        "radio",
        "What will the heads do?",
        f"q_{tag}-predict",
        options=range(len(lesson.PREDICTIONS)),
        format_func=lambda i: lesson.PREDICTIONS[i],
    )
    shared = ui.kept(
        "toggle",
        f"Share $W^Q, W^K, W^V$ across the {H} heads of layer {layer}",
        "lesson_share",
        disabled=prediction is None,
        help="Predict first: the toggle unlocks once you have chosen. The shared projection is "
        f"{collapse.source_name(collapse.DEFAULT_SOURCE)}, as on the collapse page.",
    )
    if prediction is None:
        st.info(
            "Choose a prediction first: the toggle unlocks then"
            + (" (your link switched it on; it takes effect once you have predicted)." if shared else "."),
            icon=":material/visibility_off:",
        )
    elif not shared:
        st.info(
            f"Prediction noted: *{lesson.PREDICTIONS[prediction]}*. Now switch on the toggle above to share "
            "$W^Q, W^K, W^V$ and see whether it holds.",
            icon=":material/check:",
        )
    if prediction is not None and shared:
        before = ui.cached_collapse(inp, layer, collapse.CollapsePath(0.0))
        c = ui.cached_collapse(inp, layer, collapse.CollapsePath(1.0))
        out = lesson.sharing_outcome(before, c)
        g1, g2 = st.columns(2)
        ui.chart(plots.heads.head_grid(run.attentions[layer], f"Layer {layer}: BERT's own heads"), container=g1)
        shared_title = f"Layer {layer}: one shared W<sup>Q</sup>, W<sup>K</sup>, W<sup>V</sup>"
        ui.chart(plots.heads.head_grid(c.weights, shared_title), container=g2)
        k1, k2, k4, k3 = st.columns(4)
        k1.metric(
            "Head diversity (mean JS)",
            lesson.small(out["diversity after"]),
            delta=f"{out['diversity after'] - out['diversity before']:+.3f} vs BERT's {out['diversity before']:.3f}",
            delta_color="off",
        )
        k2.metric("Largest difference between heads", lesson.small(out["max difference between heads"]))
        k4.metric(
            "Effective number of heads",
            f"{out['effective heads after']:.1f}",
            delta=f"{out['effective heads after'] - out['effective heads before']:+.1f} vs BERT's "
            f"{out['effective heads before']:.1f}",
            delta_color="off",
            help="The effective rank of the heads' outputs taken as one vector each (length 1): 1 when every head "
            "writes the same output, sharp or flat.",
        )
        k3.metric(
            "Parameters of the layer",
            f"{out['parameters after']:,}",
            delta=f"{out['parameters after'] - out['parameters before']:,}",
            delta_color="off",
        )
        right, text = lesson.prediction_feedback(prediction, out)
        ui.first_try(f"{tag}-predict", right)
        (st.success if right else st.error)(text)
        st.markdown("**Deeper: which projections must differ for heads to differ?**")
        q, _div = lesson.which_roles_question(model, run, layer, lambda path: ui.cached_collapse(inp, layer, path))
        roles_answered = ui.choice_question(
            f"{tag}-roles",
            "Sharing which of these makes every head attend identically?",
            q.options,
            q.answer,
            q.why,
            hint=r"The map is $\mathrm{softmax}(Q_i K_i^\top / \sqrt{d_k})$: which projections does it read?",
        )
        if roles_answered is not None:
            roles = ui.kept(
                "multiselect", "Try any subset: share", "lesson_roles", options=["q", "k", "v"], format_func=str.upper
            )
            if roles:
                tried = ui.cached_collapse(inp, layer, collapse.CollapsePath(1.0, roles=tuple(roles)))
                st.metric(
                    f"Head diversity sharing {', '.join(f'$W^{r.upper()}$' for r in sorted(roles))} "
                    "(rescaled mean slice)",
                    lesson.small(metrics.mean_off_diagonal(tried.diversity)),
                )
    tool("app_pages/collapse.py", "The collapse in numbers and along alpha: Shared Q/K/V", layer)
    tool("app_pages/sharing.py", "What production models share instead: multi-query and grouped-query attention", layer)

elif step == 7:
    st.markdown(
        r"Attention compares every token with every other, $q_i \cdot k_j$. Feed a layer the same token vectors "
        "(positions already added) in another order, its input's rows shuffled: what do its outputs do? Predict "
        "first."
    )
    layer, _ = ui.layer_head(run, head=False)
    q, _err = lesson.shuffle_question(model, run, layer)
    answered = ui.choice_question(
        f"{tag}-shuffle",
        "With its input's rows shuffled, the layer's outputs are:",
        q.options,
        q.answer,
        q.why,
        hint="Each output row is a weighted average over all tokens, with weights from dot products; does a dot "
        "product know positions?",
    )
    shuffled = ui.kept("toggle", "Shuffle the rows of the layer's input", "lesson_shuffle", disabled=answered is None)
    if answered is None:
        st.caption("The toggle unlocks once you have predicted.")
    else:
        st.markdown(
            "Each token meets the same others in any order, so its output is the same, only moved: attention itself "
            "cannot see order. Reorder the words of the sentence instead and BERT's outputs do change, because BERT "
            "adds a learned position embedding to every token before layer 0. That is the next lesson: positional "
            "encodings."
        )
    if shuffled and answered is not None:
        s = build.build_stages(model, run, layer, H, shuffle=True, seed=1)
        st.caption("Fed in this order: " + " ".join(plots.common.token_label(t) for t in s.tokens))
        st.metric("Largest difference after undoing the shuffle", lesson.small(s.shuffle_error))
    tool("app_pages/build.py", "Shuffle on any layer, with every stage: Build it from scratch", layer)

elif step == 8:
    st.markdown("**The seven points**\n\n" + "\n".join(f"{n}. {p}" for n, p in enumerate(lesson.POINTS, 1)))
    st.subheader("The check question, answered on your sentence")
    layer, _ = ui.layer_head(run, head=False)
    nums = lesson.check_answer(
        ui.cached_collapse(inp, layer, collapse.CollapsePath(0.0)),
        ui.cached_collapse(inp, layer, collapse.CollapsePath()),
    )
    st.table(  # a table that wraps (a scrolling grid hid its last column on a phone)
        [
            {"measure": k, "BERT's heads": lesson.number(b), "one shared W^Q, W^K, W^V": lesson.number(a)}
            for k, (b, a) in nums.items()
        ],
        hide_index=True,
    )
    (d0, d1), (h0, h1) = nums["head diversity (JS)"], nums["effective number of heads"]
    (p0, p1), (_, same) = nums["parameters"], nums["max difference between heads"]
    (s0, s1), (e0, e1) = nums["score spread"], nums["entropy / ln T"]
    overlap = [nums[f"subspace overlap W^{r}"] for r in "QKV"]
    identical = same < collapse.SAME_WEIGHTS
    st.markdown(
        (
            f"**If every head of layer {layer} shares one $W^Q, W^K, W^V$, every head computes the same attention** "
            f"(the maps differ by at most {lesson.small(same)}): head diversity falls from {d0:.3f} to "
            f"{lesson.small(d1)} nats"
            if identical
            else f"With one shared $W^Q, W^K, W^V$ the heads' maps still differ by up to {same:.2f}; head diversity "
            f"goes from {d0:.3f} to {lesson.small(d1)} nats"
        )
        + ". The heads' subspaces overlap "
        + ", ".join(f"{b:.2f} → {a:.2f}" for b, a in overlap)
        + f" ($W^Q, W^K, W^V$; 1 = one subspace), and the effective number of heads goes from {h0:.1f} to {h1:.1f}"
        + (f": {H} copies of one head" if h1 < 1.05 else "")
        + f"; the map left has score spread {s1:.2f} (BERT's heads: {s0:.2f}) and entropy {e1:.2f} of $\\ln T$ "
        f"(BERT's: {e0:.2f})"
        + (", much flatter than BERT's heads" if s1 < 0.5 * s0 else "")
        + f". Sharing saves {p0 - p1:,.0f} of the layer's {p0:,.0f} parameters"
        + (", and buys nothing with them: the heads write the same thing." if identical and h1 < 1.05 else ".")
    )
    rows = {r.rung.name: r for r in ui.cached_ladder(inp, layer)}
    scaled = {r.rung.name: r for r in ui.cached_ladder(inp, layer, True)}
    mqa, mha = rows.get("MQA"), rows.get("MHA")
    if mqa is not None and mha is not None:
        base = ui.cached_baselines(inp, layer)
        st.markdown(
            f"**Why production models share K and V instead** (multi-query, Shazeer 2019; grouped-query, Ainslie "
            f"et al. 2023): each head keeps its own $W_i^Q$, so its question stays its own. In layer {layer} with one "
            f"K and one V, the heads differ by {scaled['MQA'].diversity:.3f} when the pooled K and V keep a slice's "
            f"length ({mqa.diversity:.3f} with the plain mean, whose scores are smaller), against {mha.diversity:.3f} "
            f"in BERT's layer. Were every layer MQA in a decoder of this shape, the K/V cache that generation reads "
            f"for every new token would shrink from {mha.kv_cache:,} to {mqa.kv_cache:,} bytes per token. "
            f"Layer {layer} alone converted without training keeps a sentence-embedding cosine of "
            f"{scaled['MQA'].sentence_cosine:.3f} to BERT's as MQA with the pooled K and V rescaled "
            f"({mqa.sentence_cosine:.3f} plain mean), and {scaled['shared Q/K/V'].sentence_cosine:.3f} with one shared "
            f"Q, K and V ({rows['shared Q/K/V'].sentence_cosine:.3f} plain); removing that layer's attention keeps "
            f"{base.sentence_cosine:.3f}. "
            + "One sentence is not enough to rank these untrained conversions against each other or against removing "
            "the attention: their order changes from sentence to sentence. What sets MQA apart is that each head "
            f"keeps its own $W_i^Q$: its heads keep {scaled['MQA'].diversity / mha.diversity:.0%} of BERT's head "
            f"diversity with K and V rescaled, {mqa.diversity / mha.diversity:.0%} with the plain mean (whose "
            "smaller scores flatten every map), where one shared Q, K and V keeps none; and it trains back into a "
            "working layer, measured on held-out sentences on *What may be shared*."
        )
        trained = [
            o
            for k, o in ui.UPTRAINS.entries()
            if k[0] == inp.model and (o.rung.name == "MQA" or o.rung.name.startswith("GQA"))
        ]
        if trained:
            o = trained[-1]
            st.markdown(
                f"After uptraining on this server ({o.rung.name}, {o.rung.pooling}, layer {o.layer} alone, "
                f"{len(o.fit.losses):,} steps), {o.held_out_sentences} held-out sentences keep a cosine of "
                f"{o.held_out_before:.3f} → {o.held_out_after:.3f} (that layer's attention removed: "
                f"{o.removed_cosine:.3f})."
            )
        else:
            st.markdown(
                "How much of that a short uptraining wins back is measured on *What may be shared*: none has run "
                "on this server for this model yet."
            )
    tool("app_pages/sharing.py", "Uptrain a rung yourself: What may be shared", layer)
    st.subheader("Your answers")
    first = ui.first_answers()
    st.table(
        [
            {"question": what, "first answer": "—" if rid not in first else "right" if first[rid] else "not quite"}
            for rid, what in lesson.QUESTIONS.items()
        ],
        hide_index=True,
    )

b1, _, reset, b2 = st.columns([1, 2.6, 1.4, 1])
b1.button("← Back", disabled=step == 1, on_click=go, args=(step - 1,), key="lesson_back", width="stretch")
reset.button("Reset lesson", on_click=ui.reset_lesson, key="lesson_reset", width="stretch")
b2.button(
    "Next →", disabled=step == N, on_click=go, args=(step + 1,), key="lesson_next", type="primary", width="stretch"
)
right, answered = ui.lesson_score()  # after every question of this run: the same numbers everywhere
score_box.metric("Right at the first try", f"{right} of {answered}")
if step == N and answered == len(lesson.QUESTIONS):
    st.success(
        f"End of the lesson: {right} of {answered} questions right at the first try. Every tool is in the "
        "sidebar; the sentence box works on all of them.",
        icon=":material/school:",
    )
elif step == N:
    st.info(f"{answered} of {len(lesson.QUESTIONS)} questions answered: the steps before this one hold the others.")
