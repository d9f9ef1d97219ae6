"""Every page through Streamlit's AppTest on the real bundled model: charts equal the engine's numbers."""

from __future__ import annotations

import gc
import json
import re
import weakref

import numpy as np
import pytest
from conftest import held_page_namespaces, plotly_array, weights_digest
from streamlit.testing.v1 import AppTest

from livetest import ROOT
from mha.analyses.collapse import CollapsePath
from mha.lesson.examples import DEFAULT_TEXT
from mha.models.run import Run
from ui import cache
from ui.pages import PAGES as SPECS

TIMEOUT = 120
PAGES = [p.path for p in SPECS]
SECOND = "Dogs chase cats, and cats chase mice."


def app(**params) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    for k, v in params.items():
        at.query_params[k] = v
    return at.run()


def number(text: str) -> float:
    """The first number in a text ("4.8e-07: zero to float precision)" -> 4.8e-07, "exactly 0" -> 0)."""
    return float(re.search(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?", text).group())


def figures(at: AppTest) -> list[dict]:
    """The page's figures, each title as one line (ui.chart breaks long titles with <br>)."""
    out = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    for f in out:
        title = f["layout"].get("title", {})
        if "text" in title:
            title["text"] = title["text"].replace("<br>", " ")
    return out


def large_heatmap(at: AppTest) -> dict:
    """The one-head heatmap on the BERT heads page (the first with hover text per cell)."""
    for f in figures(at):
        for t in f["data"]:
            if t["type"] == "heatmap" and "query" in t.get("hovertemplate", ""):
                return t
    raise AssertionError("no one-head heatmap on the page")


def select(at: AppTest, key: str, value) -> None:
    at.selectbox(key=key).select(value).run()


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


KEPT_BY_THE_SESSION = {"format_func", "on_change", "on_click", "clean", "data"}  # until the widget is drawn again


def functions_handed_to_widgets(folder) -> list[str]:
    """Where a page file hands a widget a lambda or a function it defines itself (directly or in
    a functools.partial): file:line and the argument."""
    import ast

    found = []
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        is_own = lambda v, own=own: isinstance(v, ast.Lambda) or isinstance(v, ast.Name) and v.id in own  # noqa: E731
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            for kw in call.keywords:
                inner = kw.value.args if isinstance(kw.value, ast.Call) else []  # functools.partial(f, ...)
                if kw.arg in KEPT_BY_THE_SESSION and (is_own(kw.value) or any(is_own(a) for a in inner)):
                    found.append(f"{path.name}:{kw.value.lineno} {kw.arg}")
    return found


def test_no_page_hands_a_widget_a_function_of_its_own():
    """Every branch of every page, read statically (the runs below see one branch each): a
    widget's functions are bound methods or ui functions, never the page's own (ui.setting_widget)."""
    assert not functions_handed_to_widgets(ROOT / "app_pages")


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_on_a_typed_sentence(page):
    """(On the default sentence: tests/test_settings.py runs every page, twice.)"""
    at = app()
    at.text_area(key="_w_text").input(SECOND).run()
    at.switch_page(page).run()
    no_exception(at)
    assert at.title, page
    if page in ("app_pages/build.py", "app_pages/bert_heads.py"):
        assert len(at.get("plotly_chart")) >= 4
    # every chart has its text alternative under it, opening with the chart's own title
    words = [e for e in at.expander if e.label in ("The chart in words", "The diagram in words")]
    charts = figures(at)
    assert len(words) == len(charts) + len(at.get("graphviz_chart")), page
    from mha.plots.describe import plain

    said = [e.markdown[0].value.replace("\\", "") for e in words if e.label == "The chart in words"]  # unescaped
    for fig, text in zip(charts, said):
        title = plain(fig["layout"].get("title", {}).get("text", "")) or "A chart"
        assert text.startswith(title), (page, title, text[:80])
    # the session keeps its widgets' functions: none may hold the page's namespace (a function
    # defined in the page does, with every array the page made); at 512 tokens on bert-base a
    # held namespace kept the last sentence's run alive beside the next one (0.2 GiB per session)
    assert not held_page_namespaces(), f"{page}: the session holds the page's namespace"
    # nor anything else of the sentence's run: once the store lets it go, its arrays go too
    runs = [v for _, v in cache.RESULTS.entries() if isinstance(v, Run)]
    arrays = [weakref.ref(a) for r in runs for a in (r.attentions, r.hidden_states)]
    assert arrays, page
    del runs
    cache.RESULTS.clear()
    gc.collect()
    assert not [a for a in arrays if a() is not None], f"{page}: the session holds its sentence's run"


def test_typed_sentence_drives_the_head_heatmap(bert):
    at = app()
    text = "The cat sat on the mat because the cat was tired."
    at.text_area(key="_w_text").input(text).run()
    at.switch_page("app_pages/bert_heads.py").run()
    select(at, "_w_layer", 3)
    select(at, "_w_head", 7)
    no_exception(at)
    hm = large_heatmap(at)
    run = bert.attend(text)
    z = plotly_array(hm["z"])
    T = len(run.tokens)
    assert z.shape == (T, T)  # repeated "the" / "cat" keep their own rows and columns
    assert len(set(hm["y"])) == T and hm["y"][2].endswith("cat") and hm["y"][9].endswith("cat")
    # float32 sums: the app runs torch on one thread, the fixture may not (differences ~1e-6)
    np.testing.assert_allclose(z, run.attentions[3, 7], atol=1e-5)
    assert at.query_params["layer"] in ("3", ["3"]) and at.query_params["head"] in ("7", ["7"])


def test_url_parameters_restore_a_view(bert):
    text = "Time flies like an arrow."
    at = app(text=text, layer="4", head="2")
    at.switch_page("app_pages/bert_heads.py").run()
    no_exception(at)
    assert at.text_area(key="_w_text").value == text
    np.testing.assert_allclose(plotly_array(large_heatmap(at)["z"]), bert.attend(text).attentions[4, 2], atol=1e-5)


def test_a_rerun_with_the_address_before_typing_keeps_the_typed_sentence():
    """A page switch asked for before the browser showed the address the last rerun wrote carries
    the one before it (4 of 40 sessions through the proxy under load, bench_load.py): read as a
    link, it put the old sentence back. The app's own recent addresses are not links; a new
    link still is."""
    at = app()
    before = {k: at.query_params[k] for k in at.query_params}  # what the browser still shows
    assert before["text"] == DEFAULT_TEXT
    at.text_area(key="_w_text").input(SECOND).run()
    assert at.query_params["text"] == SECOND
    at.query_params.clear()
    at.query_params.update(before)  # the stale address, sent with the page switch
    at.switch_page("app_pages/overview.py").run()
    no_exception(at)
    assert at.text_area(key="_w_text").value == SECOND
    at.query_params["text"] = "A link to a new sentence."  # a link the app did not write
    at.switch_page("app_pages/bert_heads.py").run()
    assert at.text_area(key="_w_text").value == "A link to a new sentence."


def test_a_page_that_reconnects_to_a_new_session_keeps_what_it_shows():
    """A page whose server session is gone (its replica crashed, the server restarted) reconnects
    to a new one, which runs first when the learner next acts: that rerun carries the widgets'
    values as the browser shows them, the sentence typed since included, with the address the old
    session wrote before it. The browser's values win; the address follows them (through the
    proxy, the typed sentence was lost and the page went on computing the old one)."""
    at = app()
    at.switch_page("app_pages/collapse.py").run()
    address = {k: at.query_params[k] for k in at.query_params}
    at.text_area(key="_w_text").input(SECOND)
    at.slider(key="_w_collapse_alpha").set_value(0.3)
    browser = at._tree.get_widget_states()  # what the page sends with its next rerun
    new = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)  # the survivor's new session
    new.query_params.update(address)
    new.switch_page("app_pages/collapse.py")
    new._run(browser)
    no_exception(new)
    assert new.text_area(key="_w_text").value == SECOND
    assert new.slider(key="_w_collapse_alpha").value == 0.3
    assert new.query_params["text"] == SECOND and new.query_params["collapse_alpha"] == "0.3"
    assert "Layer 0 at alpha = 0.30" in " ".join(f["layout"]["title"]["text"] for f in figures(new))


@pytest.mark.parametrize(
    "params,expect",
    [
        ({"layer": "99"}, "layer 99 does not exist"),
        ({"head": "-1"}, "head -1 does not exist"),
        ({"layer": "two"}, "not a whole number"),
        ({"model": "evil/model"}, "not on the list"),
    ],
)
def test_invalid_url_parameters_give_a_notice_and_a_default(bert, params, expect):
    at = app(**params)  # a link opens the overview first: notices about the link show there
    warnings = " ".join(w.value for w in at.warning)
    at.switch_page("app_pages/bert_heads.py").run()
    no_exception(at)
    warnings += " ".join(w.value for w in at.warning)
    assert expect in warnings
    run = bert.attend(at.text_area(key="_w_text").value)
    np.testing.assert_allclose(plotly_array(large_heatmap(at)["z"]), run.attentions[0, 0], atol=1e-5)


def test_unreachable_hub_model_falls_back_with_a_message(bert):
    at = app()
    at.selectbox(key="_w_model").select("bert-base-uncased").run()
    at.switch_page("app_pages/bert_heads.py").run()
    no_exception(at)
    assert (
        any("Could not load bert-base-uncased" in e.value for e in at.error)
        or at.session_state["model"] == "all-MiniLM-L6-v2"
    )
    assert len(at.get("plotly_chart")) >= 4


def test_empty_sentence_gives_a_message_on_every_page():
    at = app()
    at.text_area(key="_w_text").input("   ").run()
    for page in PAGES:
        at.switch_page(page).run()
        no_exception(at)
    at.switch_page("app_pages/bert_heads.py").run()
    assert any("empty" in i.value for i in at.info)


def test_example_button_sets_the_sentence():
    at = app()
    at.button(key="_ex_2").click().run()  # "Coreference"
    assert "trophy" in at.text_area(key="_w_text").value
    assert "trophy" in at.session_state["text"]


def test_view_options_hide_special_merge_and_pair_blocks(bert):
    at = app()
    at.text_area(key="_w_text").input("Tokenization is unbelievable.").run()
    at.text_input(key="_w_text_b").input("It works.").run()
    at.switch_page("app_pages/bert_heads.py").run()
    run = bert.attend("Tokenization is unbelievable.", "It works.")
    assert plotly_array(large_heatmap(at)["z"]).shape == (run.n_tokens,) * 2
    at.toggle(key="_w_heads_hide").set_value(True).run()
    z = plotly_array(large_heatmap(at)["z"])
    assert z.shape == (run.n_tokens - 3,) * 2
    np.testing.assert_allclose(z.sum(1), 1, atol=1e-5)
    at.toggle(key="_w_heads_merge").set_value(True).run()
    hm = large_heatmap(at)
    assert any(y.endswith("tokenization") for y in hm["y"])
    np.testing.assert_allclose(plotly_array(hm["z"]).sum(1), 1, atol=1e-5)
    no_exception(at)


def test_build_page_parity_badge_shared_and_shuffle():
    at = app()
    at.switch_page("app_pages/build.py").run()
    no_exception(at)
    (badge,) = [s.value for s in at.success if "Parity" in s.value]
    assert number(badge.rsplit("=", 1)[1]) < 1e-5 and "zero to float precision" in badge
    # the output picture's stripe is said as what it is: one output dimension alike for every token
    (out,) = [f for f in figures(at) if f["layout"]["title"]["text"].startswith("Output = Concat")]
    z = plotly_array(out["data"][0]["z"]).astype(np.float64)  # (T, C) as drawn
    col = np.abs(z.mean(0))
    (said,) = [c.value for c in at.caption if c.value.startswith("No head blocks here")]
    alone = col.max() >= max(3 * np.median(col), 1.5 * np.sort(col)[-2])  # one column, not one of many alike
    assert ("is one dimension the layer writes alike" in said) == alone
    if alone:
        assert f"dimension {int(col.argmax())}, is one dimension" in said
        assert f"mean {z.mean(0)[col.argmax()]:+.2f} over the tokens, against {np.sort(col)[-2]:.2f}" in said
    t, d = np.unravel_index(np.abs(z).argmax(), z.shape)
    assert f"The largest cell, {z[t, d]:+.2f} at" in said and f"dimension {d}, sets the colour range" in said
    heads = at.selectbox(key="_w_build_heads")
    assert [int(o) for o in heads.options] == [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48]  # divisors of 384
    at.toggle(key="_w_build_shared").set_value(True).run()
    warn = " ".join(w.value for w in at.warning)
    assert "same map" in warn
    spread = number(warn.split("max difference between heads ")[1])
    assert spread < 1e-6
    at.toggle(key="_w_build_shuffle").set_value(True).run()
    (info,) = [i.value for i in at.info if "reordered" in i.value]
    assert number(info.split("max difference ")[1]) < 1e-4
    no_exception(at)


def test_build_page_other_head_counts_and_random_init():
    at = app()
    at.switch_page("app_pages/build.py").run()
    select(at, "_w_build_heads", 6)
    no_exception(at)
    assert not [s for s in at.success if "Parity" in s.value]  # not BERT's split: no parity claim
    at.radio(key="_w_build_source").set_value("Random (seeded)").run()
    select(at, "_w_build_heads", 1)
    no_exception(at)


def test_overview_diagram_uses_the_model_shapes():
    at = app()
    at.switch_page("app_pages/overview.py").run()
    no_exception(at)
    dot = at.get("graphviz_chart")[0].proto.spec
    assert "384 x 32" in dot and "12 heads" in " ".join(m.value for m in at.markdown)


def collapse_charts(at: AppTest) -> dict[str, np.ndarray]:
    """The collapse page's head-by-head matrices, by title."""
    out = {}
    for f in figures(at):
        title = f["layout"].get("title", {}).get("text", "")
        if title.startswith(("Head diversity", "Subspace overlap")):
            out[title] = plotly_array(f["data"][0]["z"])
    return out


def test_collapse_page_measures_equal_the_engine(bert):
    from mha.analyses import collapse, metrics

    at = app(layer="2")
    at.switch_page("app_pages/collapse.py").run()
    no_exception(at)
    at.slider(key="_w_collapse_alpha").set_value(0.3).run()
    run = bert.attend(at.session_state["text"])
    c = collapse.collapse_layer(bert, run, 2, CollapsePath(0.3))
    charts = collapse_charts(at)
    np.testing.assert_allclose(charts["Head diversity (JS, nats)"], metrics.head_diversity(c.weights), atol=1e-6)
    moved = collapse.interpolate(bert.scratch_layer(2), 0.3)
    for role in "qkv":
        w = getattr(moved, f"{role}_proj").weight.detach().numpy()
        np.testing.assert_allclose(
            charts[f"Subspace overlap W<sup>{role.upper()}</sup>"], metrics.subspace_overlap(w, bert.n_heads), atol=1e-6
        )
    grids = [f for f in figures(at) if f["layout"]["title"]["text"].startswith("Layer 2 at alpha")]
    assert grids, "no grid of the collapsed heads"
    # fully shared: the matrices say so
    at.toggle(key="_w_collapse_shared").set_value(True).run()
    charts = collapse_charts(at)
    assert np.abs(charts["Head diversity (JS, nats)"]).max() < 1e-9
    np.testing.assert_allclose(charts["Subspace overlap W<sup>Q</sup>"], 1.0, atol=1e-6)
    answer = " ".join(m.value for m in at.markdown if "one head computed" in m.value)
    assert "compute the same attention" in answer


def test_collapse_answer_is_at_alpha_one_and_the_slider_shows_what_is_in_effect(bert):
    """One statement, one setting: the answer is the shared structure (alpha = 1) whatever the
    slider says; parameters fall only at alpha = 1; deltas point the way the numbers move; with
    Shared on, the greyed slider shows 1.0, and its own value comes back when Shared is off."""
    from mha.analyses import collapse

    at = app(layer="1")
    at.switch_page("app_pages/collapse.py").run()
    assert at.selectbox(key="_w_collapse_source").value == collapse.DEFAULT_SOURCE == "scaled"
    at.slider(key="_w_collapse_alpha").set_value(0.5).run()
    no_exception(at)
    metric = {m.label: m for m in at.metric}
    params = metric["Parameters of the layer at alpha = 0.50"]
    assert params.value == "591,360" and not params.proto.delta  # every head still has its own weights
    diversity = metric["Head diversity (mean JS) at alpha = 0.50"]
    assert diversity.proto.delta.startswith("-") and "vs BERT's" in diversity.proto.delta  # lower: arrow down
    run = bert.attend(at.session_state["text"])
    shared = collapse.whole_model_effect(bert, run, [1], CollapsePath(1.0))
    half = collapse.whole_model_effect(bert, run, [1], CollapsePath(0.5))
    assert f"{shared['sentence embedding cosine']:.3f}" != f"{half['sentence embedding cosine']:.3f}"
    (answer,) = [m.value for m in at.markdown if "parameters instead of" in m.value]
    assert f"cosine {shared['sentence embedding cosine']:.3f} of the original" in answer
    assert "184,800 parameters instead of 591,360 (406,560 saved)" in answer
    at.toggle(key="_w_collapse_shared").set_value(True).run()
    slider = at.slider(key="_w_collapse_alpha")
    assert slider.value == 1.0 and slider.disabled
    metric = {m.label: m for m in at.metric}
    assert metric["Parameters of the layer at alpha = 1.00"].value == "184,800"
    assert metric["Parameters of the layer at alpha = 1.00"].proto.delta.startswith("-406,560")
    at.toggle(key="_w_collapse_shared").set_value(False).run()
    assert at.slider(key="_w_collapse_alpha").value == 0.5
    no_exception(at)


def test_collapse_experiments_leave_no_trace_in_the_cached_model(bert):
    import ui

    at = app()
    at.switch_page("app_pages/collapse.py").run()
    for layer in (0, 3, 5):
        select(at, "_w_layer", layer)
        for on in (True, False, True, False):
            at.toggle(key="_w_collapse_shared").set_value(on).run()
        at.radio(key="_w_collapse_scope").set_value("every layer").run()
        no_exception(at)
    at.switch_page("app_pages/build.py").run()
    at.toggle(key="_w_build_shared").set_value(True).run()
    no_exception(at)
    cached = ui.load_model("all-MiniLM-L6-v2")  # the process-wide model every session shares
    assert cached is not bert
    text = at.session_state["text"]
    assert np.array_equal(cached.attend(text).attentions, bert.attend(text).attentions)

    assert weights_digest(cached.model) == weights_digest(bert.model)


def test_build_page_shows_the_collapse_measures():
    at = app()
    at.switch_page("app_pages/build.py").run()
    metric = {m.label: m.value for m in at.metric}
    assert float(metric["Head diversity (mean JS between heads)"]) > 0.05
    at.toggle(key="_w_build_shared").set_value(True).run()
    metric = {m.label: m.value for m in at.metric}
    assert float(metric["Head diversity (mean JS between heads)"]) == 0
    assert float(metric["Subspace overlap of $W^Q$ slices"]) == 1
    assert float(metric["Effective number of heads"]) == 1.0


def test_atlas_page_measures_link_finder_and_comparison(bert):
    from mha.analyses import atlas

    text = (
        "It is in this spirit that a majority of American governments have passed new laws "
        "since 2009 making the registration or voting process more difficult."
    )
    at = app(text=text)
    at.switch_page("app_pages/atlas.py").run()
    no_exception(at)
    run = bert.attend(text)
    m = atlas.measures(run)
    first = figures(at)[0]
    np.testing.assert_allclose(plotly_array(first["data"][0]["z"]), m["to previous"], atol=1e-6)
    # link finder: defaults to making -> difficult; the top head is the argmax of that weight
    q, k = run.tokens.index("making"), run.tokens.index("difficult")
    table = at.dataframe[0].value
    top = np.unravel_index(run.attentions[:, :, q, k].argmax(), run.attentions.shape[:2])
    assert (table.iloc[0]["layer"], table.iloc[0]["head"]) == tuple(int(i) for i in top)
    assert table.iloc[0]["weight"] == pytest.approx(run.attentions[top[0], top[1], q, k], abs=1e-4)
    # pick another pair: the ranking follows
    at.selectbox(key="_w_link_k").select(run.tokens.index("laws")).run()
    table = at.dataframe[0].value
    j = run.tokens.index("laws")
    top = np.unravel_index(run.attentions[:, :, q, j].argmax(), run.attentions.shape[:2])
    assert (table.iloc[0]["layer"], table.iloc[0]["head"]) == tuple(int(i) for i in top)
    # compare with another sentence: the difference map is B - A of the measure
    other = "The mole dug a tunnel under the garden."
    at.text_input(key="_w_compare_text").input(other).run()
    no_exception(at)
    m_b = atlas.measures(bert.attend(other))
    diff = [f for f in figures(at) if f["layout"]["title"]["text"].startswith("entropy / ln T: compared")][0]
    expect = m_b["entropy / ln T"] - m["entropy / ln T"]
    np.testing.assert_allclose(plotly_array(diff["data"][0]["z"]), expect, atol=1e-5)
    assert f"Yours has {run.n_tokens} tokens, the compared sentence {bert.attend(other).n_tokens}" in " ".join(
        c.value for c in at.caption
    )
    assert len(at.dataframe[1].value) == 5
    info = " ".join(i.value for i in at.info)
    assert "Layer 0, head 0" in info and "mostly" not in info  # its largest share is 7%: not "mostly"
    assert atlas.describe(m, m["pattern"][0, 0], 0, 0, run.n_tokens) in info


def test_repeated_tokens_are_distinguishable_in_every_picker():
    at = app()  # the default sentence has "mole" twice and "a" twice
    for page, keys in (
        ("app_pages/atlas.py", ("_w_link_q", "_w_link_k", "_w_views_tok")),
        ("app_pages/bert_heads.py", ("_w_focus_token",)),
    ):
        at.switch_page(page).run()
        for p in (at.selectbox(key=k) for k in keys):
            labels = p.options
            assert len(set(labels)) == len(labels), p.label
            moles = [o for o in labels if o.endswith(": mole")]
            assert len(moles) == 2 and moles[0] != moles[1]


def test_why_heads_page_trains_and_shows_curves_and_table():
    at = app()
    at.switch_page("app_pages/why_heads.py").run()
    no_exception(at)
    at.select_slider(key="_w_why_steps").set_value(100).run()
    at.button(key="why_train").click().run()
    no_exception(at)
    curves = [f for f in figures(at) if f["layout"]["title"]["text"] == "Training curves"]
    assert curves
    names = {t["name"] for t in curves[-1]["data"]}
    assert {f"{kind}: accuracy" for kind in ("distinct", "grouped", "mqa", "shared", "single")} <= names
    table = at.dataframe[0].value
    assert list(table["model"]) == ["distinct", "grouped", "mqa", "shared", "single"]
    assert len([f for f in figures(at) if "markers = where each target is" in f["layout"]["title"]["text"]]) == 5
    # a second visit with the same settings shows the result at once (train button disabled)
    again = app()
    again.switch_page("app_pages/why_heads.py").run()
    again.select_slider(key="_w_why_steps").set_value(100).run()
    assert again.dataframe and again.button(key="why_train").disabled


def panel_points(fig: dict, kind: str) -> list[np.ndarray]:
    """Every panel's (T, 2) points of one kind ("queries" or "keys") from a subspace figure."""
    return [
        np.stack([plotly_array(t["x"]), plotly_array(t["y"])], -1)
        for t in fig["data"]
        if t.get("name") == kind and t["type"] == "scatter"
    ]


def test_subspaces_page_draws_one_panel_per_head_from_layer_maps(bert):
    from mha.analyses import subspaces

    at = app(layer="3")
    at.switch_page("app_pages/subspaces.py").run()
    no_exception(at)
    run = bert.attend(at.session_state["text"])
    panels = figures(at)[0]
    queries, keys = panel_points(panels, "queries"), panel_points(panels, "keys")
    assert len(queries) == len(keys) == bert.n_heads
    expect = subspaces.layer_maps(bert, run, 3)
    # the score spread from Transformers' weights, in numpy: std over keys of q . k / sqrt(d_k), mean over queries
    H, D = bert.n_heads, bert.d_model // bert.n_heads
    attn = bert.model.encoder.layer[3].attention.self
    x = run.hidden_states[3].astype(np.float64)
    q, k = (
        (x @ p.weight.detach().double().numpy().T + p.bias.detach().double().numpy()).reshape(-1, H, D).swapaxes(0, 1)
        for p in (attn.query, attn.key)
    )
    spread = (q @ k.swapaxes(1, 2) / np.sqrt(D)).std(-1).mean(-1)  # (H,)
    for h in range(bert.n_heads):
        np.testing.assert_allclose(queries[h], expect.queries[h], atol=1e-4)
        np.testing.assert_allclose(keys[h], expect.keys[h], atol=1e-4)
        title = panels["layout"]["annotations"][h]["text"]
        assert title == f"head {h}<br>fidelity {expect.fidelity[h]:.2f}<br>spread {spread[h]:.2f}"
    assert any("different pictures" in i.value for i in at.info)
    # the followed token: ringed in every panel, lines to its top 3 keys
    mole = run.tokens.index("mole")
    assert at.selectbox(key="_w_subspaces_token").value == mole
    rings = [t for t in panels["data"] if t.get("name", "").startswith("query “")]
    assert len(rings) == bert.n_heads
    np.testing.assert_allclose([plotly_array(r["x"])[0] for r in rings], expect.queries[:, mole, 0], atol=1e-4)
    # shared W^Q and W^K: one picture, said with its number
    at.toggle(key="_w_subspaces_shared").set_value(True).run()
    no_exception(at)
    queries = panel_points(figures(at)[0], "queries")
    assert max(np.abs(q - queries[0]).max() for q in queries) < 1e-5
    (done,) = [s.value for s in at.success if "same picture" in s.value]
    assert number(done.split("max difference between panels ")[1]) < 1e-5
    # on request: the animation holds 11 frames; the pool holds the sentence and the bundled ones
    assert len(figures(at)) == 2  # the panels and the spectra, until asked
    at.toggle(key="_w_subspaces_play").set_value(True).run()
    at.toggle(key="_w_subspaces_many").set_value(True).run()
    anim = figures(at)[1]
    assert len(anim["frames"]) == 11 and anim["frames"][-1]["name"] == "1.0"
    pool = figures(at)[2]
    assert "50 bundled ones" in pool["layout"]["title"]["text"]


def table_with(at: AppTest, column: str):
    """The page's table that has `column` (tables are not widgets: AppTest knows no key for them)."""
    (table,) = [d.value for d in [*at.dataframe, *at.table] if column in d.value.columns]
    return table


def ladder_table(at: AppTest):
    """The sharing page's ladder as one table: the structure, then each pooling's measures, by rung."""
    mean, restored = (table_with(at, f"head diversity (JS), {kind}") for kind in ("mean-pooled", "scale restored"))
    structure = table_with(at, "parameters (layer)")
    return mean.merge(restored, on="rung", how="left").merge(structure, on="rung", how="left")


def test_sharing_page_ladder_and_uptraining(bert):
    from mha.analyses import ladder, metrics, subspaces

    at = app(layer="5")
    at.switch_page("app_pages/sharing.py").run()
    no_exception(at)
    run = bert.attend(at.session_state["text"])
    table = ladder_table(at)
    base = ladder.baselines(bert, run, 5)
    names = [r.name for r in ladder.rungs(bert.n_heads)]
    extra = ["no attention in layer 5", "no head in any layer", "random maps as sharp as BERT's"]
    assert list(table["rung"]) == [*names, *extra]
    assert table.iloc[-1]["head diversity (JS), mean-pooled"] == round(base.random_diversity, 3)
    for rescale in (False, True):
        kind = "scale restored" if rescale else "mean-pooled"
        for r in ladder.rungs(bert.n_heads, rescale):
            expect = ladder.rung_measures(bert, run, 5, r)
            row = table[table["rung"] == r.name].iloc[0]
            assert row["parameters (layer)"] == expect.parameters
            assert row[f"sentence cosine, {kind}"] == pytest.approx(expect.sentence_cosine, abs=2e-3)
            assert row[f"head diversity (JS), {kind}"] == pytest.approx(expect.diversity, abs=2e-3)
    gone, none = table.iloc[-3], table.iloc[-2]
    assert gone["sentence cosine, mean-pooled"] == pytest.approx(base.sentence_cosine, abs=2e-3)
    assert none["sentence cosine, mean-pooled"] == pytest.approx(base.sentence_cosine_no_heads, abs=2e-3)
    assert not [m.value for m in at.markdown if "must stay distinct" in m.value]  # contradicted by the numbers
    (which,) = [m.value for m in at.markdown if "Sharing **K and V** (MQA) leaves" in m.value]
    by = {r.heads: ladder.rung_measures(bert, run, 5, r) for r in ladder.rungs(bert.n_heads)}
    scaled = {r.heads: ladder.rung_measures(bert, run, 5, r) for r in ladder.rungs(bert.n_heads, True)}
    mqa, q_only, mha = by[(12, 1, 1)], by[(1, 12, 12)], by[(12, 12, 12)]
    assert f"differ by {mha.diversity:.3f}" in which and f"leaves {scaled[(12, 1, 1)].diversity:.3f}" in which
    assert f"and {mqa.diversity:.3f}" in which and f"leaves {scaled[(1, 12, 12)].diversity:.3f}" in which
    assert f"or {q_only.diversity:.3f}" in which
    # beside its baseline (random maps exactly as sharp as the layer's) and the drift from each head's own map
    assert f"random maps exactly as sharp as theirs differ by {base.random_diversity:.3f}" in which
    assert base.random_diversity == pytest.approx(metrics.shuffled_diversity(run.attentions[5]), abs=1e-6)
    assert by[(12, 12, 12)].random_diversity == base.random_diversity  # the model's rung is the baseline: one number
    mqa_s = scaled[(12, 1, 1)]
    assert f"each MQA head's map drifts {mqa_s.drift:.3f} from its own map in BERT ({mqa.drift:.3f}" in which
    assert f"{mqa_s.drift / mha.diversity:.0%} of the distance between two of BERT's heads" in which
    # the verdict: the model's own task with every layer converted, as shipped (tests/test_verdict.py
    # recomputes the shipped scores with Transformers); the page shows each score as scipy computes it
    from scipy.stats import spearmanr

    from mha.studies import verdict

    task = verdict.shipped_verdict(bert)
    shown = table_with(at, "converted, mean-pooled").set_index("rung")
    columns = {
        ("converted", "mean-pooled"): "converted, mean-pooled",
        ("converted", "scale restored"): "converted, scale restored",
        ("uptrained", "mean-pooled"): "uptrained",
        ("floor", "mean-pooled"): "random projections",
    }
    for e in task.entries:
        if (e.kind, e.pooling) in columns:
            want = f"{spearmanr(e.values, task.gold).statistic:.3f}"
            assert shown.loc[e.rung, columns[e.kind, e.pooling]] == want, (e.kind, e.rung)
    gone = f"{spearmanr(task.removed_entry.values, task.gold).statistic:.3f}"
    assert shown.loc["every head removed", "converted, mean-pooled"] == gone
    said = " ".join(m.value for m in at.markdown)
    assert "Converted without training, best first: MHA (the model) 0.913 > GQA-6 (mean-pooled)" in said
    alone = table_with(at, "change from the model (90 %)")
    assert list(alone["rung"])[-1] == "layer 5's attention removed" and len(alone) == 17
    further = [m.value for m in at.markdown if "Why can sharing less" in m.value]
    mqa_s = task.score(task.find("converted", "MQA", "scale restored"))
    one_s = task.score(task.find("converted", "shared Q/K/V", "scale restored"))
    assert mqa_s < one_s - 0.05 and len(further) == 1  # 0.706 against 0.815: surely lower, so explained
    assert f"MQA (K and V shared) scores {mqa_s:.3f} and one shared Q, K and V {one_s:.3f}" in further[0]
    # the cosines: secondary, beside the residual stream they cannot see past
    ratio = np.mean(
        np.linalg.norm(bert.scratch_layer(5)(run.layer_input(5))[0][0].detach().numpy(), axis=-1)
        / np.linalg.norm(run.hidden_states[5], axis=-1)
    )
    assert f"layer 5's attention adds a vector {ratio:.0%} as long as the residual it joins" in said
    assert "normalised (post-norm LayerNorm)" in said and "carry on unchanged" not in said  # BERT: post-norm
    # the order of MQA and one shared Q/K/V said as this conversion's, with the other pooling's and the uptrained
    assert "This order belongs to this conversion (scale restored, untrained): with the other pooling, " in further[0]
    for r in ladder.rungs(bert.n_heads, True):
        row = table[table["rung"] == r.name].iloc[0]
        assert row["attention drift (JS), scale restored"] == pytest.approx(scaled[r.heads].drift, abs=2e-3)
    assert "Only the rungs that share **both Q and K** (shared Q/K/V, shared Q, K)" in which
    # a short uptraining of the tied rung, then the before/after table (kept for the next visitor): one W^Q
    # and one W^K through training, so every head still computes one map
    at.select_slider(key="_w_sharing_steps").set_value(250).run()
    tied = [r for r in at.selectbox(key="_w_sharing_rung").options if r.startswith("shared Q, K")][0]
    at.selectbox(key="_w_sharing_rung").select(tied).run()
    at.button(key="sharing_train").click().run()
    no_exception(at)
    outcome = table_with(at, "measure")
    error, held, diversity, fitted = outcome.iloc[0], outcome.iloc[1], outcome.iloc[2], outcome.iloc[5]
    assert "held-out" in error["measure"] and "fitted" in fitted["measure"]  # held-out error first, fitted last
    assert fitted["uptrained"] < fitted["converted"]
    assert diversity["converted"] == 0 and diversity["uptrained"] == 0
    assert held["attention removed"] == pytest.approx(
        ladder.held_out_cosine(bert, [bert.attend(t) for t in subspaces.pool_sentences()], 5), abs=2e-3
    )
    caption = " ".join(c.value for c in at.caption if "steps in" in c.value)
    assert f"from {error['converted']:.3f} (converted) to {error['uptrained']:.3f} (uptrained)" in caption
    assert f"cosine from {held['converted']:.3f} to {held['uptrained']:.3f}" in caption
    assert "Q and K stayed one matrix each for all 12 heads" in caption and "head diversity exactly 0" in caption
    again = app(layer="5")
    again.switch_page("app_pages/sharing.py").run()
    again.select_slider(key="_w_sharing_steps").set_value(250).run()
    again.selectbox(key="_w_sharing_rung").select(tied).run()
    assert again.button(key="sharing_train").disabled
    assert table_with(again, "measure").iloc[5]["uptrained"] == fitted["uptrained"]


def test_heads_needed_page_maps_held_out_curves_and_editor(bert):
    """The heads are ranked on the benchmark's train pairs; the sentences under the chart come from
    the held-out curves (dev pairs, written pairs) with their bootstrap intervals, beside random
    orders and the floor; the editor scores the written pairs."""
    import ui
    from mha.tasks import pruning, similarity
    from ui import cache

    at = app()
    at.switch_page("app_pages/heads_needed.py").run()
    no_exception(at)
    maps = [f for f in figures(at) if f["layout"]["title"]["text"].startswith(("Spearman lost", "Gradient importance"))]
    assert len(maps) == 2 and plotly_array(maps[0]["data"][0]["z"]).shape == (bert.n_layers, bert.n_heads)
    study = cache.STUDIES.get(bert.name)
    main, written = study.main, study.held_out[1]
    curve = [f for f in figures(at) if f["layout"]["title"]["text"].startswith("Removing heads one after another")][0]
    names = [t["name"] for t in curve["data"] if t.get("name")]
    assert names == [
        "random orders (8 seeds), dev pairs",
        "held out, dev: 90% bootstrap interval",
        f"held out, dev ({main.n_pairs} pairs)",
        f"held out, written ({written.n_pairs} pairs)",
        f"in sample, the ranking pairs ({study.n_rank})",
    ]
    (dev,) = [t for t in curve["data"] if t.get("name") == f"held out, dev ({main.n_pairs} pairs)"]
    drawn = similarity.PruningCurve([int(x) for x in plotly_array(dev["x"])], list(plotly_array(dev["y"])))
    assert drawn.can_go() == main.can_go()
    floor = [s for s in curve["layout"]["shapes"] if s["line"]["dash"] == "dot"][0]
    assert floor["y0"] == pytest.approx(main.curve.spearman[-1] - main.curve.spearman[0])
    (said,) = [s.value for s in at.success if "heads** can go" in s.value]
    n = main.can_go()
    change, low, high = main.change_at(n)
    assert (
        f"**{n} of 72 heads** can go" in said
        and "counted every 6 heads" in said
        and f"interval {low:+.3f} to {high:+.3f}" in said
    )
    assert f"Random orders: {min(study.random_can_go())} to {max(study.random_can_go())} (8 orders" in said
    # a strict count is said with its spread over bootstrap seeds, never one seed's figure alone
    spread = dict(pruning.seed_spread(written.strict))
    if len(spread) > 1:
        lo, hi = min(spread), max(spread)
        assert f"); counting the whole interval, between {lo} and {hi}, depending" in said
        wc, wl, wh = written.change_at(written.can_go())
        assert f"lets {written.can_go()} go (there the change is {wc:+.3f}, 90% interval {wl:+.3f} to {wh:+.3f})" in (
            said
        )
        (c, k), *rest = pruning.seed_spread(written.strict)
        assert f"seed: {c} under {k} of 100 seeds" + "".join(f", {c} under {k}" for c, k in rest[:3]) in said
    else:
        assert f"counting the whole interval, {written.strict[0]} under all 100 bootstrap seeds" in said
    main_spread = pruning.seed_spread(main.strict)
    if len(main_spread) > 1:
        assert f"**between {min(main.strict)} and {max(main.strict)}**, depending on the bootstrap's seed" in said
    # the words follow the interval: "surely" is the count whose whole interval clears the tolerance
    sure = main.surely_can_go()
    assert sure == main.strict[0] and min(main.strict) <= sure
    assert all(low >= -study.tolerance for r, low in zip(main.curve.removed, main.low) if r <= sure)
    sure = min(main.strict)
    (limits,) = [i.value for i in at.info if "can tell you" in i.value]
    agree = study.halves_agreement
    assert f"Spearman {min(agree):.2f} to {max(agree):.2f} ({len(agree)} halvings" in limits
    median_rand = sorted(study.random_can_go())[len(study.random_can_go()) // 2]
    assert ("the count clears the noise" in limits) == (sure > median_rand)
    assert f"the strict count is {ui.seed_words(written.strict, bold=False)}" in limits
    # the editor: remove the most needed head; the score is evaluate's on the written pairs for that mask
    drop = plotly_array(maps[0]["data"][0]["z"])
    top = tuple(int(i) for i in np.unravel_index(np.argmax(drop), drop.shape))
    at.multiselect(key="_w_needed_remove").select(top).run()
    no_exception(at)
    metric = {m.label: m.value for m in at.metric}
    mask = np.ones((bert.n_layers, bert.n_heads))
    mask[top] = 0
    assert float(metric["Spearman on the written pairs, 1 of 72 heads removed"]) == pytest.approx(
        similarity.evaluate(bert, head_mask=mask).spearman, abs=5e-4
    )
    view = [f for f in figures(at) if f["layout"]["title"]["text"] == "All layers x heads"][0]
    assert view["data"][0]["type"] == "heatmap"


def test_collapse_page_scores_sharing_on_the_task(bert):
    from mha.analyses import collapse
    from mha.tasks import similarity

    at = app(layer="1")
    at.switch_page("app_pages/collapse.py").run()
    at.toggle(key="_w_collapse_shared").set_value(True).run()
    no_exception(at)
    metric = {m.label: m.value for m in at.metric}
    shared = similarity.evaluate(bert, replace={1: collapse.shared_module(bert.scratch_layer(1), "scaled")}).spearman
    assert float(metric["Task: Spearman on the written pairs"]) == pytest.approx(shared, abs=5e-4)
    answer = " ".join(m.value for m in at.markdown if "one head computed" in m.value)
    n = similarity.evaluate(bert).n  # the written pairs, named: not the verdict's STS dev pairs
    assert (
        f"Spearman on the written pairs ({n} pairs; the sharing page's verdict uses the STS dev pairs) from "
        + (f"{similarity.evaluate(bert).spearman:.3f} to {shared:.3f}")
        in answer
    )
    # beside the baseline, measured the same way: layer 1's heads removed
    removed = similarity.evaluate(
        bert, head_mask=similarity.head_mask(bert, [(1, h) for h in range(bert.n_heads)])
    ).spearman
    assert f"with every head of this layer removed instead it is {removed:.3f}" in answer
    table = table_with(at, "Spearman")
    assert float(table["Spearman"].iloc[1]) == pytest.approx(removed, abs=5e-4)
    assert table.iloc[0, 0].startswith("Q, K, V pulled") and "$" not in "".join(table.iloc[:, 0])
    # the layer's own attention output, before the residual: the shared layer's and the removed one's,
    # each the mean over tokens of numpy's cosine to the model's own output
    run = bert.attend(at.session_state["text"])
    x = run.layer_input(1)
    own = bert.scratch_layer(1)(x)[0][0].detach().numpy()

    def cos(a):
        return float(np.mean((a * own).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(own, axis=-1)))

    shared_out = collapse.shared_module(bert.scratch_layer(1), "scaled")(x)[0][0].detach().numpy()
    bias = bert.scratch_layer(1).out_proj.bias.detach().numpy()  # every head removed: W^O's bias alone
    column = "layer 1 attention output cosine"
    assert float(table[column].iloc[0]) == pytest.approx(cos(shared_out), abs=6e-4)
    assert float(table[column].iloc[1]) == pytest.approx(cos(np.broadcast_to(bias, own.shape)), abs=6e-4)
    assert f"removing the attention of this layer instead: {table.iloc[1, 2]}" in answer


def test_the_collapse_pages_task_change_is_said_with_its_interval(bert):
    """The change in Spearman at the page's first setting is shown beside its 90% bootstrap
    interval, and a change whose interval spans 0 reads "no measurable change". The interval is
    checked against scipy.stats.bootstrap on the same pairs (another implementation, its own
    resamples: the two agree on whether 0 is inside unless it sits at an end)."""
    from scipy import stats

    from mha.analyses import collapse
    from mha.tasks import similarity
    from ui.warm import collapse_first_path

    at = app(layer="1")
    at.switch_page("app_pages/collapse.py").run()
    no_exception(at)
    (task,) = [m for m in at.metric if m.label.startswith("Task:")]
    path = collapse_first_path()
    base = similarity.evaluate(bert)
    now = similarity.evaluate(bert, replace={1: collapse.module_at(bert.scratch_layer(1), path)})

    def change(gold, a, b):
        return stats.spearmanr(b, gold).statistic - stats.spearmanr(a, gold).statistic

    ci = stats.bootstrap(
        (base.gold, base.per_pair, now.per_pair),
        change,
        paired=True,
        vectorized=False,
        n_resamples=1000,
        confidence_level=0.9,
        method="percentile",
        random_state=1,
    ).confidence_interval
    assert "90% interval" in task.delta and "-0.000" not in task.delta, task.delta
    if ci.low < -0.002 and ci.high > 0.002:
        assert task.delta.startswith("no measurable change"), (task.delta, ci)
    elif ci.low > 0.002 or ci.high < -0.002:
        assert task.delta.startswith(answers_signed(now.spearman - base.spearman)), (task.delta, ci)


def answers_signed(x: float) -> str:
    from mha.lesson.answers import signed

    return signed(x)


def test_a_change_is_said_with_its_interval_and_never_as_minus_zero():
    from mha.lesson.answers import change_words, signed

    assert signed(-0.0004) == "0.000" and signed(0.0004) == "0.000" and signed(-0.0006) == "-0.001"
    assert signed(0.004) == "+0.004"
    assert change_words(0.004, -0.007, 0.014) == "no measurable change (90% interval -0.007 to +0.014)"
    assert change_words(-0.05, -0.08, -0.02) == "-0.050 (90% interval -0.080 to -0.020)"


def test_why_heads_settings_survive_a_page_switch():
    at = app()
    at.switch_page("app_pages/why_heads.py").run()
    by_label = {w.label: w for kind in ("slider", "select_slider", "selectbox", "number_input") for w in at.get(kind)}
    by_label["Relations to report"].set_value(2)
    by_label["Heads (distinct / shared)"].set_value(8)
    by_label["Training steps"].set_value(300)
    by_label["Seed"].set_value(7)
    at.run()
    at.switch_page("app_pages/bert_heads.py").run()
    at.switch_page("app_pages/why_heads.py").run()
    no_exception(at)
    values = {
        w.label: w.value for kind in ("slider", "select_slider", "selectbox", "number_input") for w in at.get(kind)
    }
    assert values["Relations to report"] == 2 and values["Heads (distinct / shared)"] == 8
    assert values["Training steps"] == 300 and values["Seed"] == 7
