"""Every chart's text alternative says what the chart shows, with numbers read from its data: checked
against the attention weights Transformers returns and against numpy on the same arrays."""

from __future__ import annotations

import html
import inspect
import json
import re
import types

import numpy as np
import plotly.graph_objects as go
import pytest
from conftest import plotly_array

from mha import plots
from mha.analyses import subspaces
from mha.lesson import diagram
from mha.plots.describe import describe, plain

TEXT = "The mole on his arm was not a mole but a rare insect."


def test_a_head_in_words_names_its_strongest_link(bert):
    run = bert.attend(TEXT)
    att = run.attentions[3, 7]
    words = describe(plots.heads.attention_heatmap(att, run.tokens, "Layer 3, head 7"))
    r, c = np.unravel_index(att.argmax(), att.shape)
    assert words.startswith("Layer 3, head 7")
    assert f"the largest, {att.max():.3g}, at row “{run.tokens[r]}”, column “{run.tokens[c]}”" in words
    assert f"A grid of {run.n_tokens} rows by {run.n_tokens} columns" in words


def test_the_model_view_in_words_names_the_most_focused_and_most_spread_heads(bert):
    run = bert.attend(TEXT)
    words = describe(plots.heads.model_view(run.attentions))
    sharp = run.attentions.max(-1).mean(-1)  # (L, H): a token's largest weight, averaged
    (l1, h1), (l2, h2) = np.unravel_index(sharp.argmax(), sharp.shape), np.unravel_index(sharp.argmin(), sharp.shape)
    assert f"Most focused: layer {l1}, head {h1}, where a token's largest weight is {sharp[l1, h1]:.2f}" in words
    assert f"most spread: layer {l2}, head {h2} ({sharp[l2, h2]:.2f})" in words
    grid = describe(plots.heads.head_grid(run.attentions[0][:11], "eleven heads"))  # a padded grid
    assert f"Most focused: head {sharp[0, :11].argmax()}," in grid and f"spread: head {sharp[0, :11].argmin()} " in grid


def test_panels_in_words_give_fidelity_and_what_the_followed_token_reads(bert):
    run = bert.attend(TEXT)
    maps = subspaces.layer_maps(bert, run, 0)
    fig = plots.subspaces.subspace_panels(
        maps.queries, maps.keys, maps.fidelity, run.tokens, "panels", token=2, weights=maps.weights
    )
    words = describe(fig)
    assert f"{maps.fidelity.min():.2f} to {maps.fidelity.max():.2f}" in words
    top = np.argsort(run.attentions[0, 0, 2])[::-1][0]  # Transformers' own weights: head 0's top key for "mole"
    assert f"head 0: “{run.tokens[top]}” {run.attentions[0, 0, 2, top]:.2f}" in words


def test_lines_and_bars_in_words():
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=[0, 10, 20], y=[2.0, 0.5, 0.25], mode="lines", name="loss"))
    fig.update_layout(title="Training <b>loss</b>", xaxis_title="step")
    assert describe(fig) == ("Training loss (step). Loss: a line of 3 points from 2 at step 0 to 0.25 at step 20.")
    dip = go.Figure(go.Scatter(x=[0, 10, 20], y=[2.0, 0.1, 0.25], name="loss"))  # no mode: drawn as a line
    assert "a line of 3 points from 2 at x 0 to 0.25 at x 20; lowest 0.1 at x 10." in describe(dip)
    bars = go.Figure(go.Bar(x=["a", "b", "c"], y=[1, 3, 2], name="votes"))
    assert "Votes: 3 bars, the largest “b” = 3." in describe(bars)
    assert plain("W<sup>Q</sup> &lt;b&gt;") == "W^Q <b>"


def test_the_diagram_in_words_has_the_diagrams_shapes():
    words, dot = diagram.stages_text(16, 384, 12), diagram.stages_dot(16, 384, 12)
    for shape in ("16 x 384", "384 x 32", "16 x 32", "16 x 16", "384 x 384"):
        assert shape in words and shape in dot
    assert set(re.findall(r"\d+ x \d+", words)) <= set(re.findall(r"\d+ x \d+", dot)) | {"16 x 384"}


# --- every chart the app draws, its words against its data read independently (from the figure's JSON) ---


def _text(s) -> str:
    """Label markup as the learner reads it (the test's own reading, not describe.plain)."""
    s = re.sub(r"<sup>(.*?)</sup>", r"^\1", str(s or ""))
    s = re.sub(r"<sub>(.*?)</sub>", r"_\1", s)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", s)).split())


def _g(v: float) -> str:
    return f"{v:.3g}"


def facts(fig: go.Figure) -> list[str] | None:
    """What the words must say, read from the figure's JSON: each trace's name and key numbers (a
    grid's largest cell, a line's two ends, a band's two edges at both ends, the largest bar, a
    point cloud's size) and each level line. None for a figure that carries its own words."""
    d = json.loads(fig.to_json())
    layout, data = d["layout"], d["data"]
    if isinstance(layout.get("meta"), dict) and layout["meta"].get("alt"):
        return None
    edges = {i - 1 for i, t in enumerate(data) if t.get("fill") == "tonexty"}
    said = []
    for i, t in enumerate(data):
        if i in edges:
            continue
        if t["type"] == "heatmap":
            said.append(f"the largest, {_g(np.nanmax(plotly_array(t['z']).astype(float)))}")
            continue
        y = plotly_array(t["y"]).astype(float)
        if t["type"] == "bar":
            said.append(f"= {_g(y.max())}")
        elif i - 1 in edges:
            other = plotly_array(data[i - 1]["y"]).astype(float)
            lo, hi = np.minimum(y, other), np.maximum(y, other)
            said += [f"from {_g(lo[0])} to {_g(hi[0])}", f"from {_g(lo[-1])} to {_g(hi[-1])}"]
        elif "lines" in t.get("mode", "lines"):
            said += [f"from {_g(y[0])}", f"to {_g(y[-1])}"]
        elif "markers" in t["mode"]:
            said.append(f"{int(np.isfinite(y).sum())} ")
        else:
            continue  # text alone: labels
        said += [_text(t["name"])] if t.get("name") else []
    for s in layout.get("shapes", []):
        if s.get("type") == "line" and s.get("y0") == s.get("y1") and str(s.get("xref", "")).endswith("domain"):
            said.append(f"a level line at {_g(s['y0'])}")
    return said


@pytest.fixture(scope="module")
def charts(bert) -> dict[str, go.Figure]:
    """Every chart function of mha.plots, drawn on the bundled model and the sentence TEXT."""
    from mha.analyses import atlas, build, collapse
    from mha.analyses.collapse import CollapsePath
    from mha.lesson import answers
    from mha.tasks import pruning

    run = bert.attend(TEXT)
    m = atlas.measures(run)
    maps = subspaces.layer_maps(bert, run, 0)
    frames = [
        (a, f.queries, f.keys)
        for a, f in ((a, subspaces.layer_maps(bert, run, 0, CollapsePath(a))) for a in (0.0, 1.0))
    ]
    pool = subspaces.pool_spaces(bert, [run, bert.attend("A second sentence, short.")], 0)
    pm = subspaces.pool_maps(pool)
    own = np.arange(len(pool.tokens)) < run.n_tokens
    sp = subspaces.weight_spectra(bert.scratch_layer(0))
    s = build.build_stages(bert, run, 0, bert.n_heads)
    one = answers.one_query(run, 2)
    view = one.compare(run.attentions, 4)
    rung = types.SimpleNamespace
    rows = [
        rung(rung=rung(name=n), sentence_cosine=c, diversity=v, random_diversity=v + 0.1)
        for n, c, v in (("MHA", 1.0, 0.4), ("GQA-4", 0.8, 0.2), ("MQA", 0.6, 0.1))
    ]
    base = rung(sentence_cosine=0.5, sentence_cosine_no_heads=0.2, random_diversity=0.45)
    rng = np.random.default_rng(0)
    curves = {
        k: (list(np.linspace(2, 0.1 * (n + 1), 30)), list(np.linspace(0, 1 - 0.15 * n, 30)))
        for n, k in enumerate(("distinct", "grouped", "mqa", "shared", "single"))
    }
    H = 4
    return {
        "atlas_heatmap": plots.atlas.atlas_heatmap(m["to previous"], None, "Share of attention to the previous token"),
        "token_rows": plots.atlas.token_rows(run.attentions[:, 0, 2], run.tokens, "Where “mole” reads, head 0"),
        "matrix_heatmap": plots.build.matrix_heatmap(s.trace.concat[0], s.tokens, "Concat", boundaries=[32, 64]),
        "head_matrix": plots.collapse.head_matrix(maps.fidelity[:, None] * maps.fidelity[None], "Fidelity products"),
        "sweep_chart": plots.collapse.sweep_chart(collapse.alpha_sweep(bert, run, 0, CollapsePath(), steps=3), 0.5),
        "attention_heatmap": plots.heads.attention_heatmap(run.attentions[3, 7], run.tokens, "Layer 3, head 7"),
        "tiled_heatmap": plots.heads.tiled_heatmap(run.attentions[:2, :3], ["a", "b"], ["x", "y", "z"], "Tiles"),
        "model_view": plots.heads.model_view(run.attentions),
        "head_grid": plots.heads.head_grid(run.attentions[0], "Layer 0"),
        "line_view": plots.heads.line_view(run.attentions[2, [1, 3]], run.tokens, [1, 3]),
        "token_focus": plots.heads.token_focus(run.attentions[:, 0], run.tokens, 2),
        "ladder_chart": plots.ladder.ladder_chart(rows, rows, base),
        "group_chart": plots.ladder.group_chart(
            np.array([0.1, 0.05, 0.08]), np.array([0.12, 0.09, 0.07]), np.array([0.04, 0.5, 0.9]), 50
        ),
        "loss_curve": plots.ladder.loss_curve(list(np.geomspace(1, 0.01, 40)), "Relative error per step"),
        "verdict_chart": plots.ladder.verdict_chart(VERDICT_ROWS, "Spearman", "Every layer converted"),
        "query_rows": plots.lesson.query_rows(
            view.rows, [f"layer {a}, head {b}" for a, b in view.heads], run.tokens, "Rows"
        ),
        "pruning_chart": plots.pruning.pruning_chart(pruning.shipped_study(bert)),
        "loss_chart": plots.pruning.loss_chart(
            pruning.LossStudy(
                np.ones((2, 3)),
                [0, 3, 6],
                [5.0, 5.1, 7.0],
                [0.0, 0.02, 1.8],
                [0.0, 0.15, 2.2],
                [[5.0, 6.0, 7.0], [5.0, 5.5, 7.0]],
                (0, 1),
                4,
                4,
                [3, 3],
            )
        ),
        "subspace_panels": plots.subspaces.subspace_panels(
            maps.queries, maps.keys, maps.fidelity, run.tokens, "Panels"
        ),
        "subspace_animation": plots.subspaces.subspace_animation(frames, run.tokens, "Pulled to shared"),
        "pool_panels": plots.subspaces.pool_panels(
            pm.queries,
            pm.keys,
            pm.fidelity,
            pool.tokens,
            subspaces.token_kinds(pool.tokens),
            pool.position,
            own,
            "Pool",
        ),
        "spectra_chart": plots.subspaces.spectra_chart(
            sp.per_head, {"stacked W^Q": sp.query, "stacked W^K": sp.key}, sp.reference
        ),
        "training_curves": plots.training.training_curves(curves, 0.25),
        "experiment_maps": plots.training.experiment_maps(
            rng.dirichlet(np.ones(6), size=(H, 6)), list(range(6)), [("previous", [-1, 0, 1, 2, 3, 4])], "distinct"
        ),
    }


def test_every_chart_function_is_checked(charts):
    """Each function of mha.plots that returns a figure is in the table below."""
    drawn = {
        name
        for module in (
            plots.atlas,
            plots.build,
            plots.collapse,
            plots.heads,
            plots.ladder,
            plots.lesson,
            plots.pruning,
            plots.subspaces,
            plots.training,
        )
        for name, f in inspect.getmembers(module, inspect.isfunction)
        if f.__module__ == module.__name__ and "Figure" in str(inspect.signature(f).return_annotation)
    }
    assert drawn == set(charts)


@pytest.mark.parametrize(
    "name",
    sorted(
        "atlas_heatmap token_rows matrix_heatmap head_matrix sweep_chart attention_heatmap tiled_heatmap model_view "
        "head_grid line_view token_focus ladder_chart loss_curve verdict_chart query_rows pruning_chart "
        "subspace_panels subspace_animation pool_panels spectra_chart training_curves experiment_maps".split()
    ),
)
def test_every_chart_in_words_says_its_title_and_every_traces_numbers(charts, name):
    fig = charts[name]
    words = describe(fig)
    title = _text(json.loads(fig.to_json())["layout"].get("title", {}).get("text"))
    assert title and words.startswith(title + ".") or words.startswith(title + " ("), (name, words[:120])
    said = facts(fig)
    if said is None:  # its own words: checked against the arrays below and in the tests above
        return
    missing = [f for f in said if f.lower() not in words.lower()]
    assert not missing, (name, missing, words)
    assert "more like these" not in words and "A chart" not in words and "A series" not in words


def test_lines_with_markers_or_no_mode_are_lines_and_bands_have_both_edges(charts, bert):
    from mha.tasks import pruning

    study = pruning.shipped_study(bert)
    words = describe(charts["pruning_chart"]).lower()
    change = np.array([np.subtract(c.spearman, c.spearman[0]) for c in study.random])  # (seeds, points)
    n = len(study.random)
    assert (
        f"random orders ({n} seeds), dev pairs: a band over heads removed 0 to {study.random[0].removed[-1]}, "
        f"from {_g(change[:, 0].min())} to {_g(change[:, 0].max())} at heads removed 0"
    ) in words
    dev = study.main
    assert (
        f"from {_g(min(dev.low[-1], dev.high[-1]))} to {_g(max(dev.low[-1], dev.high[-1]))} at heads removed" in words
    )
    held = np.subtract(dev.curve.spearman, dev.curve.spearman[0])
    assert f"held out, dev ({dev.n_pairs} pairs): a line of {len(held)} points from {_g(held[0])}" in words
    assert "circles" not in words and "squares" not in words  # lines with markers are lines
    assert f"a level line at {_g(dev.curve.spearman[-1] - dev.curve.spearman[0])} (every head removed" in words
    assert f"a level line at -{study.tolerance}." in words
    training = describe(charts["training_curves"]).lower()  # scatter traces with no mode: lines
    for kind in ("distinct", "grouped", "mqa", "shared", "single"):
        assert f"{kind}: loss: a line of 30 points from 2 at step 1" in training
        assert f"{kind}: accuracy on the right axis" in training
    assert "a level line at 0.25 (chance)" in training
    ladder = describe(charts["ladder_chart"]).lower()
    assert "mean-pooled: mha 0.4 (random 0.5), gqa-4 0.2 (random 0.3), mqa 0.1 (random 0.2)" in ladder
    assert "random maps as sharp as bert's: 0.45 (a vertical line)" in ladder


VERDICT_ROWS = [  # mha.lesson.verdict.interval_rows's shape: the model, removal, two rungs
    {
        "kind": kind,
        "rung": rung,
        "pooling": pooling,
        "score": score,
        "change from the model": score - 0.9,
        "low": score - 0.92,
        "high": score - 0.88,
    }
    for kind, rung, pooling, score in (
        ("model", "MHA", "", 0.9),
        ("removed", "MHA", "", 0.8),
        ("converted", "MQA", "mean-pooled", 0.81),
        ("converted", "MQA", "scale restored", 0.7),
        ("uptrained", "MQA", "mean-pooled", 0.87),
        ("floor", "MQA", "mean-pooled", 0.75),
        ("converted", "shared Q/K/V", "mean-pooled", 0.8),
    )
]


def test_the_verdict_chart_says_every_marker_and_its_interval(charts):
    """One row per rung, a marker per variant with its interval, the two lines: all said in words."""
    words = describe(charts["verdict_chart"])
    assert words.startswith("Every layer converted. One row per rung, 2 rungs")
    assert "The model scores 0.900 and every head removed 0.800" in words
    assert "MQA: converted, mean-pooled 0.810 (-0.110 to -0.070), converted, scale restored 0.700" in words
    assert "uptrained (from the mean) 0.870 (-0.050 to -0.010), random projections (mean-pooled norms) 0.750" in words
    assert "shared Q/K/V: converted, mean-pooled 0.800 (-0.120 to -0.080)." in words
    fig = json.loads(charts["verdict_chart"].to_json())
    (mqa,) = [t for t in fig["data"] if t.get("name") == "uptrained (from the mean)"]
    assert list(mqa["y"]) == ["MQA"] and mqa["error_x"]["arrayminus"][0] == pytest.approx(0.02)


def test_the_spectra_chart_says_both_panels(charts, bert):
    sp = subspaces.weight_spectra(bert.scratch_layer(0))
    words = describe(charts["spectra_chart"])
    assert words.startswith("Singular values:")
    for h in range(bert.n_heads):
        assert f"head {h}: a line of {len(sp.per_head[h])} points from {_g(sp.per_head[h][0])}" in words
    energy = np.cumsum(sp.reference.astype(np.float64) ** 2) / np.sum(sp.reference.astype(np.float64) ** 2)
    assert "Stacked projections: cumulative energy: stacked W^Q: a line" in words
    assert f"random matrix: a line of {len(energy)} points from {_g(energy[0])} at directions kept 1" in words


def test_the_animation_in_words_says_how_far_the_heads_are_apart(bert):
    from mha.analyses.collapse import CollapsePath

    run = bert.attend(TEXT)
    frames = [(a, subspaces.layer_maps(bert, run, 1, CollapsePath(a))) for a in (0.0, 0.5, 1.0)]
    words = describe(plots.subspaces.subspace_animation([(a, f.queries, f.keys) for a, f in frames], run.tokens, "t"))
    first = frames[0][1]
    pts = np.concatenate([first.queries, first.keys], axis=1)  # (H, 2T, 2)
    far = max(np.hypot(*(pts[h] - pts[0]).T).max() for h in range(bert.n_heads))  # distance in the plane
    assert f"{bert.n_heads} panels" in words and "in 3 frames from alpha = 0.0 to 1.0" in words
    assert f"up to {far:.3g} from head 0's at alpha = 0.0" in words
    assert words.endswith("(the same picture in every panel).")  # Q and K shared: one picture


def test_the_lines_view_in_words_names_each_heads_strongest_link(bert):
    run = bert.attend(TEXT)
    words = describe(plots.heads.line_view(run.attentions[2, [1, 3]], run.tokens, [1, 3]))
    for h in (1, 3):
        i, j = np.unravel_index(run.attentions[2, h].argmax(), run.attentions[2, h].shape)
        assert (
            f"head {h}, “{run.tokens[i]}” ({i}) to “{run.tokens[j]}” ({j}), {run.attentions[2, h, i, j]:.2f}" in words
        )
    one = describe(plots.heads.line_view(run.attentions[2, 1], run.tokens, [1], query=5))
    j = int(run.attentions[2, 1, 5].argmax())
    assert (
        f"Lines from “{run.tokens[5]}” (left)" in one
        and f"to “{run.tokens[j]}” ({j}), {run.attentions[2, 1, 5, j]:.2f}" in one
    )


def test_a_long_heatmap_in_words_names_its_cell_by_tick_label_or_position():
    """Beyond 60 tokens only every k-th position has a tick label: the description names the
    largest cell by its tick label where the axis has one, else by its position and token, as
    plain text (a token "<w9>" is escaped for Plotly and read back as "<w9>")."""
    T = 130
    tokens = [f"<w{i}>" for i in range(T)]
    k = int(np.ceil(T / 60))  # 3: positions 0, 3, 6, ... carry tick labels
    r, c = 7, 9  # row 7 has no tick label, column 9 has one
    att = np.full((T, T), 0.001, dtype=np.float32)
    att[r, c] = 0.9
    fig = plots.heads.attention_heatmap(att, tokens, "long")
    assert c % k == 0 and r % k != 0
    assert f"the largest, 0.9, at row “{r}: <w{r}>”, column “<w{c}>”" in describe(fig)


def test_the_panels_send_each_token_its_position_colour_and_name(bert):
    """What reaches the browser (the figure's JSON, arrays as Plotly's typed arrays): every query
    and key marker coloured by its token's position 0..T-1 and named "position: token" on hover,
    in the panels and in their animation along alpha."""
    run = bert.attend(TEXT)
    maps = subspaces.layer_maps(bert, run, 0)
    names = [f"{i}: {html.escape(tok, quote=False)}" for i, tok in enumerate(run.tokens)]
    panels = plots.subspaces.subspace_panels(maps.queries, maps.keys, maps.fidelity, run.tokens, "panels", token=2)
    played = plots.subspaces.subspace_animation([(0.0, maps.queries, maps.keys)], run.tokens, "played")
    for fig in (panels, played):
        spec = json.loads(fig.to_json())
        markers = [t for t in spec["data"] if t.get("name") in ("queries", "keys")]
        assert len(markers) == 2 * run.n_heads
        for t in markers:
            np.testing.assert_array_equal(plotly_array(t["marker"]["color"]), np.arange(run.n_tokens))
            assert t["hovertext"] == names


def test_the_most_focused_head_says_when_its_focus_is_the_first_token():
    """A causal head that puts 0.97 of every row on the first token is the sharpest, and its words say
    where that weight goes; a sharp head on the previous token gets no such note."""
    T = 6
    sink = np.zeros((T, T))
    sink[:, 0] = 0.97
    sink[np.arange(T), np.arange(T)] += 0.03
    sink[0, 0] = 1.0
    prev = np.eye(T)
    prev[np.arange(1, T), np.arange(T - 1)] = 0.9
    prev[np.arange(1, T), np.arange(1, T)] = 0.1
    spread = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]
    words = describe(plots.heads.model_view(np.stack([[sink, spread]]).astype(np.float32)))
    assert (
        "head 0, where a token's largest weight is 0.97 on average (on the first token for 100% of its tokens)" in words
    )
    words = describe(plots.heads.model_view(np.stack([[prev, spread]]).astype(np.float32)))
    assert "0.90 on average;" in words and "first token for" not in words
