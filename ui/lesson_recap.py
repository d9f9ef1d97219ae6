"""The lesson's last step drawn: the check question answered on the learner's sentence, the model's
own task's verdict on sharing (mha.lesson.verdict), why production models share K and V (mha.lesson.recap),
and the learner's answers. Called from ui/lesson_steps.py's DRAW table."""

from __future__ import annotations

from typing import TYPE_CHECKING

import streamlit as st

from mha.analyses import collapse, groups, ladder, metrics
from mha.lesson import answers, recap, steps
from mha.lesson import verdict as verdict_words

from . import cache
from .quiz import first_answers
from .studies import shipped_or_kept
from .widgets import ladder_inside, layer_head

if TYPE_CHECKING:
    from .lesson_steps import StepContext


def recap_step(c: StepContext) -> None:
    st.header("The check question, answered on your sentence")
    layer, _ = layer_head(c.run, head=False)
    ans = c.answer(layer)
    st.table(  # a table that wraps (a scrolling grid hid its last column on a phone)
        [
            {
                "measure": k,
                f"{c.model.traits.who}'s heads": answers.number(b),
                "one shared W^Q, W^K, W^V": answers.number(a),
            }
            for k, b, a in ans.table()
        ],
        hide_index=True,
    )
    t, across = c.model.traits, None
    if 1 < t.kv_groups < t.n_heads:  # K and V across groups, beside random subspaces: 1 within a group by construction
        bert = c.collapse_at(layer, collapse.CollapsePath().at(0.0))
        group = groups.groups_of(t.n_heads, t.kv_groups)
        across = {r: groups.pair_means(bert.overlap[r], group)[1] for r in "kv"}
    floor = metrics.random_overlap(t.d_head, c.model.d_model)
    st.markdown(recap.sharing(ans, layer, t.who, across, floor))
    verdict = shipped_or_kept(c.inp.model)
    task = verdict_words.recap_words(verdict, t.who) if verdict is not None else ""
    if c.model.traits.grouped:
        # its ladder starts at its own K/V groups: no MHA rung for recap.production to compare with,
        # so neither its measures nor their buttons
        st.markdown(grouped_words(c, layer))
        if task:
            st.markdown(task)
    else:
        _production(c, layer, task)
    if verdict is not None:
        st.markdown(verdict_words.kept_words(verdict))
    else:
        st.info(
            f"The verdict on {t.who}'s own task (every layer converted, scored on held-out data) is computed on "
            "*What may be shared*.",
            icon=":material/timer:",
        )
    c.tool("app_pages/sharing.py", "Uptrain a rung yourself: What may be shared", layer)
    st.header("Your answers")
    first = first_answers()
    st.table(
        [
            {"question": what, "first answer": "—" if rid not in first else "right" if first[rid] else "not quite"}
            for rid, what in steps.QUESTIONS.items()
        ],
        hide_index=True,
    )


def _production(c: StepContext, layer: int, task: str) -> None:
    """recap.production on a model with a K and V per head, with the verdict's words `task`; on a long
    sentence the rungs' measures inside the layer wait for a button, as on What may be shared."""
    inside = ladder_inside(c.inp, c.run, layer, "lesson_inside")
    plain = {r.rung.name: r for r in cache.cached_ladder(c.inp, layer, whole=False)} if inside else {}
    scaled = {r.rung.name: r for r in cache.cached_ladder(c.inp, layer, True, whole=False)} if inside else {}
    if "MQA" in plain and "MHA" in plain:
        base = cache.cached_baselines(c.inp, layer, False)
        st.markdown(recap.production(layer, plain, scaled, base, c.model.traits.who, task))
    elif task:
        st.markdown(task)


def grouped_words(c: StepContext, layer: int) -> str:
    """recap.grouped for this sentence and layer: within- and across-group diversity, the pool's, the caches."""
    m, H, G = c.model, c.model.n_heads, c.model.traits.kv_groups
    D = m.traits.d_head
    caches = tuple(ladder.kv_cache_bytes(m.n_layers, g, D) for g in (G, H, 1))
    if G == 1:  # multi-query: no groups to compare, the heads against random maps as sharp as theirs
        w = c.run.attentions[layer]  # (H, T, T)
        causal = m.traits.causal
        mine = metrics.mean_off_diagonal(metrics.head_diversity(metrics.Rows.of(w).causal(causal)))
        t = m.traits
        window = None
        if t.sliding_layers:  # past the window only the full layers' caches grow
            full = m.n_layers - len(t.sliding_layers)
            window = (t.widest_window, len(t.sliding_layers), ladder.kv_cache_bytes(full, G, D))
        random = metrics.shuffled_diversity(w, causal, window=t.window(layer))
        return recap.multi_query(t.who, H, layer, mine, random, caches[:2], window)
    pool = cache.cached_group_diversity(c.inp.model)
    return recap.grouped(m.traits.who, H, G, layer, groups.within_across(c.run.attentions, layer, H, G), pool, caches)
