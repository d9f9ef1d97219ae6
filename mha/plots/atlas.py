"""The head atlas: every head coloured by one measure, where one token reads across layers."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from mha.plots.common import SCALE, integer_heatmap, token_axis


def atlas_heatmap(
    values: np.ndarray,
    hover: list[list[str]] | None,
    title: str,
    zmin: float = 0.0,
    zmax: float | None = None,
    diverging: bool = False,
) -> go.Figure:
    """An (L, H) map of one per-head measure; the hover card of each head lists all its measures
    (`hover`), or, without it, the value shown."""
    v = np.asarray(values, dtype=np.float64)
    L, H = v.shape
    if hover is None:
        hover = [[f"layer {la}, head {h}: {v[la, h]:+.3f}" for h in range(H)] for la in range(L)]
    if diverging:
        lim = float(np.abs(v).max()) or 1.0
        zmin, zmax = -lim, lim
    fig = go.Figure(
        integer_heatmap(
            v,
            text=hover,
            hoverinfo="text",
            colorscale="RdBu_r" if diverging else SCALE,
            zmin=zmin,
            zmax=zmax,
            colorbar=dict(thickness=10),
        )
    )
    fig.update_layout(
        title=title,
        height=140 + 34 * L,
        margin=dict(l=10, r=10, t=50, b=10),
        xaxis=dict(title="head", dtick=1, side="top"),
        yaxis=dict(title="layer", dtick=1, autorange="reversed"),
    )
    return fig


def token_rows(rows: np.ndarray, tokens: list[str], title: str, zmax: float | None = None) -> go.Figure:
    """(L, T) where one token reads at each layer: layers as rows, key tokens as columns; `zmax`
    gives charts shown side by side one colour scale."""
    xcats, xaxis = token_axis(tokens)
    L = rows.shape[0]
    fig = go.Figure(
        go.Heatmap(
            z=np.asarray(rows, dtype=np.float32),
            x=xcats,
            y=list(range(L)),
            colorscale=SCALE,
            zmin=0,
            zmax=zmax,
            hovertemplate="layer %{y} → %{x}: %{z:.3f}<extra></extra>",
            colorbar=dict(title="share", thickness=10),
        )
    )
    fig.update_layout(
        title=title,
        height=120 + 30 * L,
        margin=dict(l=10, r=10, t=50, b=10),
        xaxis=xaxis,
        yaxis=dict(title="layer", dtick=1, autorange="reversed"),
    )
    return fig
