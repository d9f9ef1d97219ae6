"""The lesson: one token's attention in the heads that send it to different places."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from mha.plots.common import SCALE, token_axis


def query_rows(rows: np.ndarray, labels: list[str], tokens: list[str], title: str) -> go.Figure:
    """(k, T) attention rows of one query token, one per head (labels): drawn with the keys down
    the side and the heads across (a column sums to 1), so that a phone's 390 px hold every head's
    number and every token's label at 12 px; the number in a cell is its weight in % (none under 5 %)."""
    ycats, yaxis = token_axis(tokens)
    z = np.asarray(rows, dtype=np.float32).T  # (T, k): a key per row, a head per column
    heads = [label.replace(", ", "<br>").replace(" (", "<br>(") for label in labels]  # "layer 0<br>head 2"
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(range(len(labels))),
            y=ycats,
            colorscale=SCALE,
            zmin=0,
            zmax=1,
            text=np.where(z >= 0.05, np.char.mod("%d", np.round(z * 100).astype(int)), ""),  # in %: fits a phone's cell
            texttemplate="%{text}",
            textfont=dict(size=12),
            customdata=np.array(labels)[None, :].repeat(z.shape[0], 0),
            hovertemplate="%{customdata} → %{y}: %{z:.2f}<extra></extra>",
            colorbar=dict(title="weight", thickness=10),
        )
    )
    fig.update_layout(
        title=title,
        height=150 + 24 * len(tokens),
        margin=dict(l=10, r=10, t=110, b=10),
        xaxis=dict(tickmode="array", tickvals=list(range(len(labels))), ticktext=heads, side="top", tickfont_size=12),
        yaxis=dict(**yaxis, autorange="reversed"),
        font=dict(size=13),
    )
    return fig
