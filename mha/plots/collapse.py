"""The collapse page: head-by-head matrices (diversity, overlap) and the measures along alpha."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from mha.plots.common import SCALE, integer_heatmap, legend_below, role_colour, sup


def head_matrix(values: np.ndarray, title: str, zmax: float = 1.0, label: str = "value") -> go.Figure:
    """An (H, H) head-by-head matrix (diversity, overlap) with integer head axes."""
    v = np.asarray(values, dtype=np.float64)
    H = v.shape[0]
    fig = go.Figure(
        integer_heatmap(
            v,
            colorscale=SCALE,
            zmin=0.0,
            zmax=zmax,
            colorbar=dict(title=dict(text=label, side="right"), thickness=10),
            hovertemplate="head %{y} vs head %{x}: %{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        height=320,
        margin=dict(l=10, r=10, t=50, b=10),
        xaxis=dict(title="head", dtick=1 if H <= 16 else None),
        yaxis=dict(title="head", autorange="reversed", dtick=1 if H <= 16 else None),
    )
    return fig


def sweep_chart(rows: list[dict[str, float]], current: float | None = None) -> go.Figure:
    """Measures against alpha (rows of collapse.LayerCollapse.summary()): diversity, overlaps and
    the entropy of a map / ln T on the left axis, the effective number of heads on the right."""
    alphas = [r["alpha"] for r in rows]
    fig = go.Figure()
    shown = [k for k in rows[0] if k.startswith(("head diversity", "subspace overlap"))]
    for key in [*shown, "entropy / ln T", "effective number of heads"]:
        right = key == "effective number of heads"
        fig.add_trace(
            go.Scatter(
                x=alphas,
                y=[r[key] for r in rows],
                name=sup(key),
                mode="lines+markers",
                yaxis="y2" if right else "y",
                line=dict(color=role_colour(key), dash="dot" if right else None),
            )
        )
    if current is not None:
        fig.add_vline(x=current, line=dict(color="grey", dash="dash"), annotation_text="alpha now")
    fig.update_layout(
        title="Distinct (alpha = 0) -> shared (alpha = 1)",
        height=380,
        margin=dict(l=10, r=10, t=50, b=10),
        xaxis=dict(title="alpha"),
        yaxis=dict(title="divergence / overlap / entropy share", range=[0, 1.05]),
        yaxis2=dict(title="effective number of heads", overlaying="y", side="right", rangemode="tozero"),
    )
    return legend_below(fig)
