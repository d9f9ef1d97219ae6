"""The lesson: every head as a dot, its weight on one link against another."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .common import SCALE, token_label


def relation_scatter(first: np.ndarray, second: np.ndarray, names: tuple[str, str]) -> go.Figure:
    """Every head (L, H) as a dot: its weight on one link (x) against another (y)."""
    L, H = first.shape
    labels = [f"layer {l}, head {h}" for l in range(L) for h in range(H)]
    fig = go.Figure(
        go.Scatter(
            x=first.ravel(),
            y=second.ravel(),
            mode="markers",
            text=labels,
            marker=dict(
                size=9,
                color=np.repeat(np.arange(L), H),
                colorscale=SCALE,
                showscale=True,
                colorbar=dict(title="layer", thickness=10),
            ),
            hovertemplate="%{text}<br>"
            + token_label(names[0])
            + ": %{x:.2f}<br>"
            + token_label(names[1])
            + ": %{y:.2f}<extra></extra>",
        )
    )
    fig.update_layout(
        title="One dot per head: how much it makes each link",
        height=420,
        margin=dict(l=10, r=10, t=50, b=10),
        xaxis=dict(title=f"weight {token_label(names[0])}", range=[-0.02, 1.02]),
        yaxis=dict(title=f"weight {token_label(names[1])}", range=[-0.02, 1.02]),
    )
    return fig
