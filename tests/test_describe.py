"""Every chart's text alternative says what the chart shows, with numbers read from its data: checked
against the attention weights Transformers returns and against numpy on the same arrays."""

from __future__ import annotations

import re

import numpy as np

from mha import diagram, plots, subspaces
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
    assert describe(fig) == (
        "Training loss (step). Loss: a line from 2 at step 0 to 0.25 at step 20, between 0.25 and 2."
    )
    bars = go.Figure(go.Bar(x=["a", "b", "c"], y=[1, 3, 2], name="votes"))
    assert "Votes: 3 bars, the largest “b” = 3." in describe(bars)
    assert plain("W<sup>Q</sup> &lt;b&gt;") == "W^Q <b>"


def test_the_diagram_in_words_has_the_diagrams_shapes():
    words, dot = diagram.stages_text(16, 384, 12), diagram.stages_dot(16, 384, 12)
    for shape in ("16 x 384", "384 x 32", "16 x 32", "16 x 16", "384 x 384"):
        assert shape in words and shape in dot
    assert set(re.findall(r"\d+ x \d+", words)) <= set(re.findall(r"\d+ x \d+", dot)) | {"16 x 384"}
