"""Why many heads: live training curves and each trained model's attention on one example."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from mha.plots.common import SCALE, head_colour, legend_below, role_colour


def training_curves(
    curves: dict[str, tuple[list[float], list[float]]], chance: float | None = None, title: str = "Training curves"
) -> go.Figure:
    """Loss (left) and all-targets accuracy (right) per step for each model: {kind: (losses, accs)}."""
    fig = go.Figure()
    for kind, (losses, accs) in curves.items():
        c = role_colour(kind)
        steps = list(range(1, len(losses) + 1))
        fig.add_trace(go.Scatter(x=steps, y=losses, name=f"{kind}: loss", line=dict(color=c, dash="dot")))
        fig.add_trace(go.Scatter(x=steps, y=accs, name=f"{kind}: accuracy", yaxis="y2", line=dict(color=c)))
    if chance is not None:
        fig.add_hline(y=chance, yref="y2", line=dict(color="grey", dash="dash"), annotation_text="chance")
    fig.update_layout(
        height=380,
        margin=dict(l=10, r=10, t=40, b=10),
        title=title,
        xaxis=dict(title="step"),
        yaxis=dict(title="loss (dotted)", rangemode="tozero"),
        yaxis2=dict(title="all targets right (solid)", overlaying="y", side="right", range=[0, 1.02]),
    )
    return legend_below(fig)


def experiment_maps(
    weights: np.ndarray, tokens: list[int], relations: list[tuple[str, list[int]]], title: str
) -> go.Figure:
    """A trained model's heads on one example (H, T, T), target keys of each relation marked.

    relations: [(name, target key position for each query position (-1 = none)), ...].
    """
    from plotly.subplots import make_subplots

    H = weights.shape[0]
    fig = make_subplots(1, H, subplot_titles=[f"head {h}" for h in range(H)], horizontal_spacing=0.02)
    symbols = ["circle-open", "square-open", "diamond-open", "x-thin-open"]
    for h in range(H):
        fig.add_trace(
            go.Heatmap(
                z=weights[h],
                colorscale=SCALE,
                zmin=0,
                zmax=1,
                showscale=h == H - 1,
                colorbar=dict(title="weight"),
                hovertemplate="query %{y} → key %{x}: %{z:.2f}<extra></extra>",
            ),
            1,
            h + 1,
        )
        for n, (name, keys) in enumerate(relations):
            q = [i for i, k in enumerate(keys) if k >= 0]
            fig.add_trace(
                go.Scatter(
                    x=[keys[i] for i in q],
                    y=q,
                    mode="markers",
                    name=f"target: {name}",
                    legendgroup=name,
                    showlegend=h == 0,
                    marker=dict(symbol=symbols[n % 4], size=7, color=head_colour(n + 1), line=dict(width=2)),
                    hoverinfo="skip",
                ),
                1,
                h + 1,
            )
        fig.update_xaxes(showticklabels=False, row=1, col=h + 1)
        fig.update_yaxes(autorange="reversed", showticklabels=h == 0, row=1, col=h + 1)
    fig.update_layout(
        title=title, height=330, margin=dict(l=10, r=10, t=70, b=10), legend=dict(orientation="h", y=-0.05)
    )
    return fig
