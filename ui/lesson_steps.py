"""The lesson's steps drawn: one function per step of mha.lesson.steps.STEPS, found by the step's key in
DRAW (the page writes the step's opening paragraph first). A step asks its question (ui.quiz),
draws what the answer unlocks, and links to the tool page that goes further; the engine
(mha.lesson.answers, mha.lesson.recap) computes every answer and sentence."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import streamlit as st

from mha import plots
from mha.analyses import atlas, build, collapse, metrics, subspaces
from mha.lesson import answers, check_question, steps, structure_words
from mha.lesson import verdict as verdict_words
from mha.lesson.diagram import stages_dot, stages_text
from mha.models.family import LoadedModel
from mha.models.run import Run

from . import cache
from .classroom import record
from .quiz import choice_question, first_try, number_question
from .settings import setting_widget
from .state import Inputs
from .studies import shipped_or_kept
from .widgets import chart, diagram, layer_head, token_picker


@dataclass(frozen=True)
class StepContext:
    """What every step's drawing reads: the sentence's inputs and run, the model, and the step's question tag."""

    inp: Inputs
    run: Run
    model: LoadedModel
    tag: str

    @property
    def shape(self) -> steps.Shape:
        """T tokens and the model's traits."""
        return steps.Shape(self.run.n_tokens, self.model.traits)

    def tool(self, page: str, label: str, layer: int | None = None, head: int | None = None) -> None:
        """A link that opens a tool page with the same sentence, layer and head."""
        params = {"text": self.inp.text, "model": self.inp.model}
        params |= {"layer": str(layer)} if layer is not None else {}
        params |= {"head": str(head)} if head is not None else {}
        st.page_link(page, label=label, icon=":material/open_in_new:", query_params=params)

    def collapse_at(self, layer: int, path: collapse.CollapsePath) -> collapse.LayerCollapse:
        return cache.cached_collapse(self.inp, layer, path)

    def answer(self, layer: int) -> check_question.Answer:
        """The check question on `layer`: the model's heads against one shared W^Q, W^K, W^V."""
        path = collapse.CollapsePath()
        before, after = self.collapse_at(layer, path.at(0.0)), self.collapse_at(layer, path)
        return check_question.answer(before.summary(), after.summary(), self.model.d_model, self.model.n_heads, path)


def _variant_ints(variant: str) -> list[int]:
    return [int(v) for v in variant.split("-")] if variant else []


def truth(c: StepContext, record: str, variant: str = "") -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """A question of the lesson as the server computes it on `c`'s sentence, in the version
    `variant` ("" or the numbers its qid ends with: step 1's token, a layer, a layer and two
    heads): (its options, None for typed numbers; its right answers as labels). The steps ask
    it from here, and a class's teacher view counts answers against it (never against what a
    student's session stored). ValueError for a version the sentence does not have."""
    v = _variant_ints(variant)
    if record == "one-query:spread":
        q = answers.spread_question(c.run, answers.one_query(c.run, v[0]))
    elif record == "two-heads:sub":
        q = answers.subspace_question(c.model, c.run, *v)
    elif record == "jobs:prev":
        q = answers.previous_token_question(c.run)[0]
    elif record == "sharing:roles":
        q = answers.which_roles_question(c.model, c.run, v[0], lambda path: c.collapse_at(v[0], path))[0]
    elif record == "order:shuffle":
        q = answers.shuffle_question(c.model, c.run, v[0])[0]
    elif record == "sharing:predict":
        graded = [answers.prediction_feedback(i, c.answer(v[0]))[0] for i in range(len(answers.PREDICTIONS))]
        return answers.PREDICTIONS, tuple(p for p, ok in zip(answers.PREDICTIONS, graded) if ok)
    elif record in ("stages:q", "concat:out"):
        shape = answers.stage_shapes(c.run, c.model)["Q_i" if record == "stages:q" else "output"]
        return None, (" x ".join(map(str, shape)),)
    else:
        raise ValueError(f"no question {record!r}")
    return q.options, (q.options[q.answer],)


def _hidden(what: str) -> None:
    st.info(what, icon=":material/visibility_off:")


def follow_one_token(c: StepContext) -> None:
    s = c.shape
    L, H = s.L, s.H
    try:
        default, rule = answers.query_rule(c.run.tokens, c.run.traits)
    except ValueError as e:  # no content word: nothing to follow
        st.info(f"This step follows one word: {e}. Type a longer sentence, or press *Next*.")
        return
    tokens = c.run.tokens
    pick, why_pick = st.columns([1, 1.6], vertical_alignment="bottom")
    query = token_picker("Token to follow (the query)", tokens, default, "lesson_query", container=pick)
    word = plots.common.token_label(tokens[query])
    why_pick.caption(
        f"Chosen by a rule: {rule}. Pick any other token."
        if query == default
        else f"Your pick (the rule, {rule}, chose “{plots.common.token_label(tokens[default])}”)."
    )
    one = answers.one_query(c.run, query)
    q = answers.spread_question(c.run, one)
    park = answers.parking_words(c.run)
    answered = choice_question(
        f"{c.tag}-spread",
        f"Predict first: a head may give one word more than half of “{word}”'s weight. How many different words of "
        f"your sentence get that from at least one of the {L * H} heads? "
        f"({park[:1].upper() + park[1:]}, where heads park attention, do not count as words.)",  # [CLS] stays upper
        q.options,
        q.answer,
        q.why,
        hint=f"Each head has {structure_words.qk_words(c.run.traits)}, so each scores the keys its own way; count the "
        "words that "
        f"get more than half of some head's weight. Many heads park this token's weight on "
        f"{answers.parking_words(c.run).replace(' and ', ' or ')} instead, or spread it."
        + (
            f" The model is causal: {structure_words.reads(c.run.traits, c.run.n_tokens)}."
            if c.run.traits.causal
            else ""
        ),
        variant=str(query),
        version=f"following “{word}” ({query})",
    )
    if answered is None:
        _hidden("Answer first: the heads are shown after your prediction.")
    else:
        view = one.compare(c.run.attentions, 4, skip=(query - 1,))  # the previous token: step 5's question
        k = len(view.keys)
        labels = [f"layer {la}, head {he}" for la, he in view.heads]
        labels[-1] += " (best)"  # the best compromise (the title says so): short enough for a phone column
        title = f"Where “{word}” looks, in {k} heads and the best compromise"
        chart(plots.lesson.query_rows(view.rows, labels, tokens, title))
        st.caption(view.caption(tokens, answers.parking_words(c.run)))
    c.tool("app_pages/atlas.py", "Rank every head for any two words: the link finder", *one.targets[0][1:3])


def stages(c: StepContext) -> None:
    s = c.shape
    T, C, H, D = s.T, s.C, s.H, s.D
    answered = number_question(
        f"{c.tag}-q",
        r"How big is one head's $Q_i$ for your sentence? (rows $\times$ columns)",
        ["rows", "columns"],
        answers.stage_shapes(c.run, c.model)["Q_i"],
        f"One row per token (T = {T}) and $d_k = d_{{model}} / h$ = {C} / {H} = {D} columns: X ({T} x {C}) times "
        f"$W_i^Q$ ({C} x {D}).",
        hint=r"$Q_i = X W_i^Q$: X has one row per token and $d_{model}$ columns; $W_i^Q$ maps $d_{model}$ to $d_k$.",
    )
    if answered is None:
        _hidden("Answer first: the diagram with every shape follows.")
    else:
        G, causal = c.model.traits.kv_groups, c.model.traits.causal  # K/V groups and a causal mask, drawn
        shape = structure_words.diagram_args(c.model.traits)
        diagram(
            stages_dot(T, C, H, groups=G, causal=causal, **shape),
            stages_text(T, C, H, groups=G, causal=causal, **shape),
        )
    c.tool("app_pages/build.py", "See every stage on your sentence: Build it from scratch")


def two_heads(c: StepContext) -> None:
    H = c.shape.H
    layer, _ = layer_head(c.run, head=False)
    c1, c2 = st.columns(2)
    a = setting_widget(
        "selectbox", "First head", "lesson_head_a", c1, options=range(H), format_func=lambda h: f"head {h}"
    )
    b = setting_widget(
        "selectbox", "Second head", "lesson_head_b", c2, options=range(H), format_func=lambda h: f"head {h}"
    )
    q = answers.subspace_question(c.model, c.run, layer, a, b)
    token = answers.content_token(c.run)
    word = plots.common.token_label(c.run.tokens[token])
    answered = choice_question(
        f"{c.tag}-sub",
        f"Will heads {a} and {b} of layer {layer} send “{word}” to the same key (the one with its largest weight)?",
        q.options,
        q.answer,
        q.why,
        hint=f"A head's weights come from $q \\cdot k$ in its own subspace, made by its "
        f"{structure_words.qk_words(c.run.traits)[4:]}. Two heads compute them with their own matrices.",
        variant=f"{layer}-{a}-{b}",
        version=f"layer {layer}, heads {a} and {b}, “{word}”",
    )
    if answered is None:
        _hidden("Predict first: the two pictures follow.")
    else:
        maps = cache.cached_layer_maps(c.inp, layer, subspaces.BERT)
        pick = [a, b]
        title = f"Layer {layer}: heads {a} and {b}, “{word}” ringed"
        chart(
            plots.subspaces.subspace_panels(
                maps.queries[pick],
                maps.keys[pick],
                maps.fidelity[pick],
                c.run.tokens,
                title,
                heads=pick,
                token=token,
                weights=maps.weights[pick],
            )
        )
        st.caption(
            f"A token has one colour in both panels, by position (dark purple = first, yellow = last). The ring is "
            f"“{word}” as a query; its lines go to the 3 keys it reads most in that head. Fidelity: the share of the "
            "head's scores the 2-D picture keeps (1 = exact)."
        )
    c.tool("app_pages/subspaces.py", "Every head's subspace, and how sharing folds them: Subspaces", layer)


def concat(c: StepContext) -> None:
    s = c.shape
    C, H, D = s.C, s.H, s.D
    layer, _ = layer_head(c.run, head=False)
    h2, d2 = answers.other_split(H, C, c.model.traits.d_head)
    answered = number_question(
        f"{c.tag}-out",
        f"A what-if the page does not draw: the same layer with {h2} heads of $d_k = {d2}$ instead of {H} heads of "
        f"{D}. What shape would its output have for your sentence? (rows x columns)",
        ["rows", "columns"],
        answers.stage_shapes(c.run, c.model)["output"],
        f"The concatenation is $T \\times (h \\cdot d_k)$: {h2} x {d2} = {h2 * d2} columns"
        + (f", as {H} x {D} = {H * D}" if H * D == h2 * d2 else f" (yours: {H} x {D} = {H * D})")
        + f", and $W^O$ ($h d_k \\times d_{{model}}$) maps them to $d_{{model}}$ = {C}. The output is "
        "$T \\times d_{model}$ whatever the number of heads, the width the layer started with, so layers can be "
        "stacked.",
        hint=r"Each head gives $T \times d_k$; $h$ of them side by side, then $W^O$ is $h d_k \times d_{model}$.",
    )
    if answered is None:
        _hidden("Answer first: the layer's concatenation and output follow.")
    else:
        mixed = setting_widget("toggle", r"Show the output after $W^O$", "lesson_mixed")
        built = build.build_stages(c.model, c.run, layer, H)
        shown = built.tokens[:64]
        if mixed:
            plus = " + b" if c.model.scratch_layer(layer).out_proj.bias is not None else ""
            chart(plots.build.matrix_heatmap(built.trace.output[0, :64], shown, "Output = Concat W<sup>O</sup>" + plus))
        else:
            slices = [h * D for h in range(1, H)]
            title = "Concat(head_1, ..., head_h)"
            chart(plots.build.matrix_heatmap(built.trace.concat[0, :64], shown, title, boundaries=slices))
        st.caption("The lines mark where each head's slice starts; after $W^O$ there are no slices left.")
    c.tool("app_pages/build.py", "Every stage, step by step: Build it from scratch", layer)


def jobs(c: StepContext) -> None:
    m = cache.cached_measures(c.inp)
    chart(plots.atlas.atlas_heatmap(m["to previous"], atlas.hover_text(m), "Share of attention to the previous token"))
    q, best, _vertical = answers.previous_token_question(c.run)
    choice_question(
        f"{c.tag}-prev",
        "Read it off the chart: which head reads the previous token most?",
        q.options,
        q.answer,
        q.why,
        hint="Hover the heads in the chart above: the brightest cell is the largest share.",
    )
    st.markdown("Now a head of your choice:")
    layer, head = layer_head(c.run)
    st.info(
        atlas.describe(m, m["pattern"][layer, head], layer, head, c.run.n_tokens, c.run.traits.window(layer)),
        icon=":material/psychology:",
    )
    title = f"Layer {layer}, head {head}"
    chart(plots.heads.attention_heatmap(c.run.attentions[layer, head], c.run.tokens, title, height=420))
    c.tool("app_pages/atlas.py", "Every measure of every head: Head atlas", *best)


def share_qkv(c: StepContext) -> None:
    H = c.shape.H
    layer, _ = layer_head(c.run, head=False)
    prediction = setting_widget(
        "radio",
        "What will the heads do?",
        f"q_{c.tag}-predict-{layer}",  # each layer its own question (its own right answers)
        options=range(len(answers.PREDICTIONS)),
        format_func=lambda i: answers.PREDICTIONS[i],
    )
    shared = setting_widget(
        "toggle",
        f"Share $W^Q, W^K, W^V$ across the {H} heads of layer {layer}",
        "lesson_share",
        disabled=prediction is None,
        help="Predict first: the toggle unlocks once you have chosen. The shared projection is "
        f"{collapse.source_name(collapse.DEFAULT_SOURCE)}, as on the collapse page.",
    )
    if prediction is not None:  # graded as it is made: its first answer is the prediction, shared or not yet
        options, right_ones = truth(c, "sharing:predict", str(layer))
        right = options[prediction] in right_ones
        first_try(f"{c.tag}-predict", right)
        qid = f"{c.tag}-predict-{layer}"
        record(qid, [f"q_{qid}"], prediction, options, right, right_ones, f"layer {layer}")
    if prediction is None:
        link = " (your link switched it on; it takes effect once you have predicted)" if shared else ""
        _hidden(f"Choose a prediction first: the toggle unlocks then{link}.")
    elif not shared:
        st.info(
            f"Prediction noted: *{answers.PREDICTIONS[prediction]}*. Now switch on the toggle above to share "
            "$W^Q, W^K, W^V$ and see whether it holds.",
            icon=":material/check:",
        )
    else:
        _shared_layer(c, layer, prediction)
    c.tool("app_pages/collapse.py", "The collapse in numbers and along alpha: Shared Q/K/V", layer)
    production = "What production models share instead: multi-query and grouped-query attention"
    c.tool("app_pages/sharing.py", production, layer)


def _shared_layer(c: StepContext, layer: int, prediction: int) -> None:
    """Step 6 once predicted and shared: both grids, the measures, the verdict, then which roles."""
    ans = c.answer(layer)
    g1, g2 = st.columns(2)
    who = c.model.traits.who
    chart(plots.heads.head_grid(c.run.attentions[layer], f"Layer {layer}: {who}'s own heads"), container=g1)
    shared_title = f"Layer {layer}: one shared W<sup>Q</sup>, W<sup>K</sup>, W<sup>V</sup>"
    chart(plots.heads.head_grid(c.collapse_at(layer, collapse.CollapsePath()).weights, shared_title), container=g2)
    k1, k2, k4, k3 = st.columns(4)
    k1.metric(
        "Head diversity (mean JS)",
        answers.small(ans.diversity_shared),
        delta=f"{answers.signed(ans.diversity_shared - ans.diversity_bert, 3)} vs {who}'s {ans.diversity_bert:.3f}",
        delta_color="off",
    )
    k2.metric("Largest difference between heads", answers.small(ans.difference_shared))
    k4.metric(
        "Effective number of heads",
        f"{ans.heads_shared:.1f}",
        delta=f"{answers.signed(ans.heads_shared - ans.heads_bert, 1)} vs {who}'s {ans.heads_bert:.1f}",
        delta_color="off",
        help="The effective rank of the heads' outputs taken as one vector each (length 1): 1 when every head "
        "writes the same output, sharp or flat.",
    )
    k3.metric("Parameters of the layer", f"{ans.params_shared:,}", delta=f"{-ans.params_saved:,}", delta_color="off")
    right, text = answers.prediction_feedback(prediction, ans)
    first_try(f"{c.tag}-predict", right)
    (st.success if right else st.error)(text)
    task = shipped_or_kept(c.inp.model)  # the same question on the model's own task, every layer, held out
    if task is not None:
        st.markdown(verdict_words.check_answer(task, who))
    if c.model.traits.grouped:
        from .lesson_recap import grouped_words

        st.info(grouped_words(c, layer), icon=":material/share:")
    st.markdown("**Deeper: which projections must differ for heads to differ?**")
    q, _div = answers.which_roles_question(c.model, c.run, layer, lambda path: c.collapse_at(layer, path))
    roles_answered = choice_question(
        f"{c.tag}-roles",
        "Sharing which of these makes every head attend identically?",
        q.options,
        q.answer,
        q.why,
        hint=f"The map is ${structure_words.map_tex(c.model.traits)}$: which projections does it read?",
        variant=str(layer),
        version=f"layer {layer}",
    )
    if roles_answered is None:
        return
    roles = setting_widget(
        "multiselect", "Try any subset: share", "lesson_roles", options=["q", "k", "v"], format_func=str.upper
    )
    if roles:
        tried = c.collapse_at(layer, collapse.CollapsePath(1.0, roles=tuple(roles)))
        st.metric(
            f"Head diversity sharing {', '.join(f'$W^{r.upper()}$' for r in sorted(roles))} (rescaled mean slice)",
            answers.small(metrics.mean_off_diagonal(tried.diversity)),
        )


def order(c: StepContext) -> None:
    H = c.shape.H
    layer, _ = layer_head(c.run, head=False)
    q, _err = answers.shuffle_question(c.model, c.run, layer)
    answered = choice_question(
        f"{c.tag}-shuffle",
        "With its input's rows shuffled, the layer's outputs are:",
        q.options,
        q.answer,
        q.why,
        hint="Each output row is a weighted average over all tokens, with weights from dot products; does a dot "
        "product know positions?",
        variant=str(layer),
        version=f"layer {layer}",
    )
    shuffled = setting_widget(
        "toggle", "Shuffle the rows of the layer's input", "lesson_shuffle", disabled=answered is None
    )
    if answered is None:
        st.caption("The toggle unlocks once you have predicted.")
    elif c.run.traits.order_inside:
        t = c.run.traits
        rotary = t.positions == "rotary"
        st.markdown(
            f"Here the order is seen inside the layer: {t.who}'s causal mask lets each token read only the tokens "
            "before it"
            + (
                ", and its rotary positions turn $q$ and $k$ by their place, so that $q \\cdot k$ depends on the "
                "distance between two tokens (Su et al. 2021, *RoFormer*). Take both away"
                if rotary
                else ". Take the mask away"
            )
            + " and the same weights only reorder the outputs: the dot product itself knows no positions. Where "
            "positions enter, added to the tokens (BERT, GPT-2) or rotated into the scores"
            + (" (RoPE)" if rotary else " (as Llama-class decoders do)")
            + ", is the next lesson: positional encodings."
        )
    else:
        st.markdown(
            "Each token meets the same others in any order, so its output is the same, only moved: attention itself "
            "cannot see order. Reorder the words of the sentence instead and BERT's outputs do change, because BERT "
            "adds a learned position embedding to every token before layer 0. That is the next lesson: positional "
            "encodings."
        )
    if shuffled and answered is not None:
        built = build.build_stages(c.model, c.run, layer, H, shuffle=True, seed=1)
        st.caption("Fed in this order: " + " ".join(plots.common.token_label(t) for t in built.tokens))
        if built.order_errors is None:
            st.metric("Largest difference after undoing the shuffle", answers.small(built.shuffle_error))
        else:
            cols = st.columns(len(built.order_errors))
            for col, (name, err) in zip(cols, built.order_errors.items()):
                col.metric(f"Largest difference after undoing the shuffle, {name}", answers.small(err))
    c.tool("app_pages/build.py", "Shuffle on any layer, with every stage: Build it from scratch", layer)


def recap_step(c: StepContext) -> None:
    from .lesson_recap import recap_step as draw  # the recap's drawing, in its own module

    draw(c)


DRAW: dict[str, Callable[[StepContext], None]] = {
    "one-query": follow_one_token,
    "stages": stages,
    "two-heads": two_heads,
    "concat": concat,
    "jobs": jobs,
    "sharing": share_qkv,
    "order": order,
    "recap": recap_step,
}
