"""Pure figure builders: arrays in, Plotly figures out (no Streamlit, no model).

Tokens repeat ("the", "mole"), and Plotly merges equal category labels, so every axis uses
unique categories "i: token" (hover shows them) with the plain token as tick text.
Colour scale: viridis (perceptually uniform, colour-blind safe).
"""

from __future__ import annotations

import html

import numpy as np
import plotly.graph_objects as go

SCALE = "Viridis"


def token_label(token: str) -> str:
    """A token as literal text for Plotly (which renders a few HTML tags): escape &, <, >."""
    return html.escape(token, quote=False)


def positions(tokens: list[str]) -> list[str]:
    """Unique axis categories "i: token", so repeated tokens keep their own row and column."""
    return [f"{i}: {token_label(t)}" for i, t in enumerate(tokens)]


def attention_heatmap(
    weights: np.ndarray, tokens: list[str], title: str = "", zmax: float | None = 1.0,
    height: int | None = None,
) -> go.Figure:
    """One head's attention (T, T): row = query token, column = key token."""
    cats = positions(tokens)
    fig = go.Figure(
        go.Heatmap(
            z=np.asarray(weights, dtype=np.float32), x=cats, y=cats, colorscale=SCALE,
            zmin=0.0, zmax=zmax, colorbar=dict(title="weight"),
            hovertemplate="query %{y} → key %{x}<br>weight %{z:.3f}<extra></extra>",
        )
    )
    T = len(tokens)
    labels = [token_label(t) for t in tokens]
    axis = dict(tickmode="array", tickvals=cats, ticktext=labels, type="category")
    if T > 60:  # too many to read: show every k-th label
        k = int(np.ceil(T / 60))
        axis.update(tickvals=cats[::k], ticktext=labels[::k])
    fig.update_layout(
        title=title, xaxis=dict(title="key (attended to)", side="top", **axis),
        yaxis=dict(title="query (attending)", autorange="reversed", **axis),
        height=height or min(900, 260 + 18 * T), margin=dict(l=10, r=10, t=80, b=10),
    )
    return fig
