"""Do we need every head?: the pruning curves of a study (mha.tasks.pruning.HeadsStudy,
mha.tasks.pruning.LossStudy)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from mha.plots.common import legend_below, role_colour

if TYPE_CHECKING:
    from mha.tasks.pruning import HeadsStudy, LossStudy

BAND = "rgba(17, 119, 51, 0.18)"  # the held-out colour, light: its bootstrap interval


def _change(spearman: list[float]) -> np.ndarray:
    return np.subtract(spearman, spearman[0])


GREY = "rgba(136, 136, 136, 0.25)"  # the band of random orders


def _band(fig: go.Figure, x: list[int], high, low, colour: str, name: str) -> None:
    """A shaded band from `low` to `high` over x, named once in the legend."""
    fig.add_trace(go.Scatter(x=x, y=high, mode="lines", line=dict(width=0), showlegend=False, hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=x, y=low, mode="lines", line=dict(width=0), fill="tonexty", fillcolor=colour, name=name))


def _finish(fig: go.Figure, tolerance: float, score: str) -> None:
    """The tolerance as a level line (negative: a score that falls; positive: a loss that rises)
    and the layout, the y axis "change in `score`"."""
    fig.add_hline(
        y=tolerance,
        line=dict(color="grey", dash="dash"),
        annotation_text=f"{tolerance:+g}",
        annotation_position="bottom left" if tolerance < 0 else "top left",
    )
    fig.update_layout(
        title="Removing heads one after another, least important first",
        height=440,
        margin=dict(l=10, r=10, t=50, b=10),
        xaxis=dict(title="heads removed"),
        yaxis=dict(title=f"change in {score}"),
    )
    legend_below(fig)


def pruning_chart(study: HeadsStudy) -> go.Figure:
    """The change in Spearman as heads go, least important first (pruning.HeadsStudy): held out on
    the benchmark's dev pairs (solid, with its bootstrap interval shaded) and on the written pairs
    (dotted, with its interval as error bars), in sample on the ranking pairs (dashed), the band of
    random orders (dev pairs), the tolerance and the floor with every head removed."""
    fig = go.Figure()
    rand = study.random
    removed = rand[0].removed
    change = np.array([_change(c.spearman) for c in rand])  # (seeds, points)
    _band(fig, removed, change.max(0), change.min(0), GREY, f"random orders ({len(rand)} seeds), dev pairs")
    main = study.main
    _band(fig, main.curve.removed, main.high, main.low, BAND, f"held out, dev: {study.level:.0%} bootstrap interval")
    for h, (dash, marker) in zip(study.held_out, ((None, "circle"), ("dot", "diamond"))):
        c = _change(h.curve.spearman)
        error = None if h is main else dict(type="data", array=np.subtract(h.high, c), arrayminus=np.subtract(c, h.low))
        fig.add_trace(
            go.Scatter(
                x=h.curve.removed,
                y=c,
                error_y=error,
                name=f"held out, {'dev' if h is main else 'written'} ({h.n_pairs} pairs)",
                mode="lines+markers",
                marker=dict(symbol=marker),
                line=dict(color=role_colour("held out"), dash=dash, width=3 if h is main else 2),
            )
        )
    fig.add_trace(
        go.Scatter(
            x=study.in_sample.removed,
            y=_change(study.in_sample.spearman),
            name=f"in sample, the ranking pairs ({study.n_rank})",
            mode="lines+markers",
            marker=dict(symbol="square"),
            line=dict(color=role_colour("in sample"), dash="dash", width=1.5),
        )
    )
    floor = main.curve.spearman[-1] - main.curve.spearman[0]
    fig.add_hline(
        y=floor,
        line=dict(color="black", dash="dot"),
        annotation_text=f"every head removed (dev): {floor:+.2f}",
        annotation_position="top right",
    )
    _finish(fig, -study.tolerance, "Spearman")
    return fig


def loss_chart(study: LossStudy) -> go.Figure:
    """The change in next-token loss as heads go, least important first (pruning.LossStudy),
    held out on the scoring texts with its bootstrap interval, beside the band of random orders,
    the tolerance and the floor (every head removed)."""
    fig = go.Figure()
    x = study.removed
    change = np.array([_change(c) for c in study.random])  # (seeds, points)
    _band(fig, x, change.max(0), change.min(0), GREY, f"random orders ({len(study.random)} seeds)")
    _band(fig, x, study.high, study.low, BAND, f"held out: {study.level:.0%} bootstrap interval")
    fig.add_trace(
        go.Scatter(
            x=x,
            y=_change(study.loss),
            name=f"held out ({study.n_score} sentences)",
            mode="lines+markers",
            line=dict(color=role_colour("held out"), width=3),
        )
    )
    _finish(fig, study.tolerance, "next-token loss (nats)")
    return fig
