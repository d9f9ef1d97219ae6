"""The build page: a matrix of vectors (one row per token), such as X, Q, the concatenation."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from mha.plots.common import token_axis


def matrix_heatmap(
    values: np.ndarray,
    tokens: list[str],
    title: str,
    column_title: str = "dimension",
    boundaries: list[int] | None = None,
    height: int | None = None,
) -> go.Figure:
    """A T x N matrix of vectors (one row per token), diverging colours centred on 0.

    boundaries: column positions to mark with a line (e.g. where each head's slice starts).
    """
    v = np.asarray(values, dtype=np.float32)
    ycats, yaxis = token_axis(tokens, max_labels=40)
    lim = float(np.abs(v).max()) or 1.0
    fig = go.Figure(
        go.Heatmap(
            z=v,
            y=ycats,
            colorscale="RdBu_r",
            zmid=0,
            zmin=-lim,
            zmax=lim,
            colorbar=dict(title="value<br>red +, blue −"),
            hovertemplate="%{y}, " + column_title + " %{x}: %{z:.3f}<extra></extra>",
        )
    )
    shapes = [
        dict(type="line", x0=b - 0.5, x1=b - 0.5, y0=-0.5, y1=len(tokens) - 0.5, line=dict(color="black", width=1))
        for b in (boundaries or [])
    ]
    fig.update_layout(
        title=title,
        shapes=shapes,
        xaxis=dict(title=column_title),
        yaxis=dict(autorange="reversed", **yaxis),
        height=height or min(600, 160 + 16 * len(tokens)),
        margin=dict(l=10, r=10, t=50, b=10),
    )
    return fig
