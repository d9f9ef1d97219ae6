"""What may be shared: the ladder's rungs (mha.ladder.RungMeasures) and an uptraining's loss."""

from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go

from .common import role_colour

if TYPE_CHECKING:
    from ..ladder import RungMeasures


def ladder_chart(rows: list[RungMeasures]) -> go.Figure:
    """The ladder's rungs (ladder.RungMeasures) left to right: sentence and layer-output cosine
    (left axis), head diversity (right axis)."""
    names = [r.rung.name for r in rows]
    fig = go.Figure()
    for key, label in [("sentence_cosine", "sentence cosine"), ("layer_cosine", "layer output cosine")]:
        fig.add_trace(
            go.Scatter(
                x=names,
                y=[getattr(r, key) for r in rows],
                name=label,
                mode="lines+markers",
                line=dict(color=role_colour(label)),
            )
        )
    fig.add_trace(
        go.Bar(
            x=names,
            y=[r.diversity for r in rows],
            name="head diversity (JS)",
            yaxis="y2",
            marker_color=role_colour("diversity"),
            opacity=0.5,
        )
    )
    fig.update_layout(
        title="Down the ladder: what sharing costs, and whether the heads stay different",
        height=380,
        margin=dict(l=10, r=10, t=50, b=10),
        yaxis=dict(title="cosine to BERT", range=[0, 1.02]),
        yaxis2=dict(title="head diversity (JS)", overlaying="y", side="right", rangemode="tozero"),
        xaxis=dict(type="category"),
        legend=dict(orientation="h", y=-0.2),
    )
    return fig


def loss_curve(losses: list[float], title: str) -> go.Figure:
    """A training loss per step (log scale)."""
    fig = go.Figure(go.Scatter(y=losses, mode="lines", line=dict(color=role_colour("loss"))))
    fig.update_layout(
        title=title,
        height=300,
        margin=dict(l=10, r=10, t=50, b=10),
        xaxis=dict(title="step"),
        yaxis=dict(title="relative error", type="log"),
    )
    return fig
