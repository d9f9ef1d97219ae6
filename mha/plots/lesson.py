"""The lesson: one token's attention in the heads that send it to different places."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from mha.plots.common import SCALE, token_axis


def query_rows(rows: np.ndarray, labels: list[str], tokens: list[str], title: str) -> go.Figure:
    """(k, T) attention rows of one query token, one per head (labels), keys as columns; each row
    sums to 1, the number in a cell is its weight in % (none under 5 %)."""
    xcats, xaxis = token_axis(tokens)
    z = np.asarray(rows, dtype=np.float32)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=xcats,
            y=list(range(len(labels))),
            colorscale=SCALE,
            zmin=0,
            zmax=1,
            text=np.where(z >= 0.05, np.char.mod("%d", np.round(z * 100).astype(int)), ""),  # in %: fits a phone's cell
            texttemplate="%{text}",
            textfont=dict(size=12),
            customdata=np.array(labels)[:, None].repeat(z.shape[1], 1),
            hovertemplate="%{customdata} → %{x}: %{z:.2f}<extra></extra>",
            colorbar=dict(title="weight", thickness=10),
        )
    )
    fig.update_layout(
        title=title,
        height=130 + 42 * len(labels),
        margin=dict(l=10, r=10, t=50, b=10),
        xaxis=xaxis,
        yaxis=dict(tickmode="array", tickvals=list(range(len(labels))), ticktext=labels, autorange="reversed"),
        font=dict(size=13),
    )
    return fig
