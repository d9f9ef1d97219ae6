"""Do we need every head?: the pruning curves of a study (mha.pruning.HeadsStudy)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from .common import role_colour

if TYPE_CHECKING:
    from ..pruning import HeadsStudy


def pruning_chart(study: HeadsStudy) -> go.Figure:
    """Spearman lost as heads go, per part of the pairs (pruning.HeadsStudy): ranked on the other
    part (held out, solid), on the same part (in sample, dashed), and the band of random orders
    (every seed and part, shaded), each against the full model's score on that part."""
    fig = go.Figure()
    rand = [c for f in study.folds for c in f.random]
    removed = rand[0].removed
    change = np.array([np.subtract(c.spearman, c.spearman[0]) for c in rand])  # (curves, points)
    fig.add_trace(
        go.Scatter(x=removed, y=change.max(0), mode="lines", line=dict(width=0), showlegend=False, hoverinfo="skip")
    )
    fig.add_trace(
        go.Scatter(
            x=removed,
            y=change.min(0),
            mode="lines",
            line=dict(width=0),
            fill="tonexty",
            fillcolor="rgba(136, 136, 136, 0.25)",
            name=f"random orders ({len(study.seeds)} seeds x {len(study.folds)} parts)",
        )
    )
    for n, f in enumerate(study.folds):
        for kind, curve, dash in (("held out", f.held_out, None), ("in sample", f.in_sample, "dash")):
            fig.add_trace(
                go.Scatter(
                    x=curve.removed,
                    y=np.subtract(curve.spearman, curve.spearman[0]),
                    name=f"{kind}, part {n + 1} ({len(f.pairs)} pairs)",
                    mode="lines+markers",
                    marker=dict(symbol=["circle", "diamond", "square", "triangle-up"][n % 4]),
                    line=dict(color=role_colour(kind), dash=dash, width=3 if kind == "held out" else 1.5),
                )
            )
    fig.add_hline(
        y=-study.tolerance,
        line=dict(color="grey", dash="dash"),
        annotation_text=f"-{study.tolerance}",
        annotation_position="bottom left",
    )
    fig.update_layout(
        title="Removing heads one after another, least important first",
        height=420,
        margin=dict(l=10, r=10, t=50, b=10),
        xaxis=dict(title="heads removed"),
        yaxis=dict(title="change in Spearman on that part"),
        legend=dict(orientation="h", y=-0.25),
    )
    return fig
