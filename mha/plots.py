"""Pure figure builders: arrays in, Plotly figures out (no Streamlit, no model).

Tokens repeat ("the", "mole"), and Plotly merges equal category labels, so every axis uses
unique categories "i: token" (hover shows them) with the plain token as tick text.
Colour scale: viridis (perceptually uniform, colour-blind safe).
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

if TYPE_CHECKING:
    from .pruning import HeadsStudy

SCALE = "Viridis"


def sup(text: str) -> str:
    """Plain maths in a chart label typeset as Plotly's HTML: W^Q -> W<sup>Q</sup>."""
    return re.sub(r"\^(\w)", r"<sup>\1</sup>", text)


def token_label(token: str) -> str:
    """A token as literal text for Plotly (which renders a few HTML tags): escape &, <, >."""
    return html.escape(token, quote=False)


def positions(tokens: list[str]) -> list[str]:
    """Unique axis categories "i: token", so repeated tokens keep their own row and column."""
    return [f"{i}: {token_label(t)}" for i, t in enumerate(tokens)]


def _token_axis(tokens: list[str], max_labels: int = 60) -> tuple[list[str], dict]:
    """Unique categories for one axis and the tick settings that show the plain tokens."""
    cats = positions(tokens)
    labels = [token_label(t) for t in tokens]
    k = max(1, int(np.ceil(len(tokens) / max_labels)))  # too many to read: every k-th label
    return cats, dict(tickmode="array", tickvals=cats[::k], ticktext=labels[::k], type="category")


def attention_heatmap(
    weights: np.ndarray,
    tokens: list[str],
    title: str = "",
    zmax: float | None = 1.0,
    height: int | None = None,
    key_tokens: list[str] | None = None,
) -> go.Figure:
    """One head's attention (Tq, Tk): row = query token, column = key token.

    key_tokens defaults to tokens (a square map); give it for a block such as A->B.
    """
    ycats, yaxis = _token_axis(tokens)
    xcats, xaxis = _token_axis(key_tokens if key_tokens is not None else tokens)
    fig = go.Figure(
        go.Heatmap(
            z=np.asarray(weights, dtype=np.float32),
            x=xcats,
            y=ycats,
            colorscale=SCALE,
            zmin=0.0,
            zmax=zmax,
            colorbar=dict(title="weight"),
            hovertemplate="query %{y} → key %{x}<br>weight %{z:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        xaxis=dict(title="key (attended to)", side="top", **xaxis),
        yaxis=dict(title="query (attending)", autorange="reversed", **yaxis),
        height=height or min(900, 260 + 18 * len(tokens)),
        margin=dict(l=10, r=10, t=80, b=10),
    )
    return fig


HEAD_COLOURS = [  # Plotly's "Safe" qualitative palette (colour-blind safe), cycled
    "#88CCEE",
    "#CC6677",
    "#DDCC77",
    "#117733",
    "#332288",
    "#AA4499",
    "#44AA99",
    "#999933",
    "#882255",
    "#661100",
    "#6699CC",
    "#888888",
]
TILE = 40  # the model view pools each head's map to at most TILE x TILE cells


def pool(att: np.ndarray, size: int) -> np.ndarray:
    """Mean-pool the last two axes (..., T, T) to (..., s, s) with s = min(T, size)."""
    T = att.shape[-1]
    if T <= size:
        return att
    edges = np.linspace(0, T, size + 1).round().astype(int)
    rows = np.add.reduceat(att, edges[:-1], axis=-2) / np.diff(edges)[:, None]  # (..., s, T)
    return np.add.reduceat(rows, edges[:-1], axis=-1) / np.diff(edges)  # (..., s, s)


def _tile_axis(centres: list[float], labels: list[str], **extra) -> dict:
    """An axis labelled at the centre of each tile, without grid lines."""
    return dict(tickmode="array", tickvals=centres, ticktext=labels, showgrid=False, zeroline=False, **extra)


def tiled_heatmap(
    maps: np.ndarray,
    row_labels: list[str],
    col_labels: list[str],
    title: str = "",
    tile: int = TILE,
    zmax: float = 1.0,
) -> go.Figure:
    """A grid of attention maps (R, K, T, T) drawn as ONE heatmap (not R*K subplots).

    Each map is mean-pooled to at most `tile` cells a side and quantised to 0..250 (uint8),
    so the figure stays small at 512 tokens. White lines separate the tiles.
    """
    R, K = maps.shape[:2]
    pooled = pool(np.asarray(maps, dtype=np.float32), tile)  # (R, K, s, s)
    s = pooled.shape[-1]
    img = pooled.transpose(0, 2, 1, 3).reshape(R * s, K * s)  # (R*s, K*s)
    z = np.clip(np.round(img / zmax * 250), 0, 250).astype(np.uint8)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            colorscale=SCALE,
            zmin=0,
            zmax=250,
            hoverinfo="skip",
            colorbar=dict(
                title="weight",
                tickvals=[0, 62.5, 125, 187.5, 250],
                ticktext=[f"{v * zmax:.2g}" for v in (0, 0.25, 0.5, 0.75, 1)],
            ),
        )
    )
    lines = [dict(type="line", x0=k * s - 0.5, x1=k * s - 0.5, y0=-0.5, y1=R * s - 0.5) for k in range(1, K)]
    lines += [dict(type="line", y0=r * s - 0.5, y1=r * s - 0.5, x0=-0.5, x1=K * s - 0.5) for r in range(1, R)]
    for ln in lines:
        ln["line"] = dict(color="white", width=2)
    fig.update_layout(
        title=title,
        shapes=lines,
        height=min(1100, 120 + 70 * R),
        margin=dict(l=10, r=10, t=60, b=10),
        xaxis=_tile_axis([(k + 0.5) * s - 0.5 for k in range(K)], col_labels, side="top"),
        yaxis=_tile_axis([(r + 0.5) * s - 0.5 for r in range(R)], row_labels, autorange="reversed"),
    )
    return fig


def model_view(attentions: np.ndarray, tile: int = TILE) -> go.Figure:
    """Every layer x head of a model (L, H, T, T) at a glance, one shared 0..1 colour scale."""
    L, H = attentions.shape[:2]
    return tiled_heatmap(
        attentions, [f"layer {l}" for l in range(L)], [f"head {h}" for h in range(H)], "All layers x heads", tile
    )


def head_grid(weights: np.ndarray, title: str = "", cols: int = 6, tile: int = TILE) -> go.Figure:
    """The H heads of one layer (H, T, T) as a grid of tiles, `cols` per row."""
    H, T = weights.shape[0], weights.shape[-1]
    cols = min(cols, H)
    rows = -(-H // cols)
    padded = np.zeros((rows * cols, T, T), dtype=np.float32)
    padded[:H] = weights
    grid = padded.reshape(rows, cols, T, T)  # (rows, cols, T, T)
    return tiled_heatmap(
        grid,
        [f"heads {r * cols}-{min(H, (r + 1) * cols) - 1}" for r in range(rows)],
        [f"+{c}" for c in range(cols)],
        title,
        tile,
    )


def line_view(
    weights: np.ndarray,
    tokens: list[str],
    heads: list[int] | None = None,
    top_k: int = 3,
    min_weight: float = 0.05,
    query: int | None = None,
) -> go.Figure:
    """BertViz-style lines: queries on the left, keys on the right, opacity = weight.

    weights: (H, T, T) for the heads to draw, or (T, T) for one. For each query only its
    top_k keys with weight >= min_weight are drawn (so 512 tokens stay light); `query` limits
    the lines to one query token.
    """
    w = np.asarray(weights, dtype=np.float32)
    if w.ndim == 2:
        w = w[None]
    heads = heads if heads is not None else list(range(w.shape[0]))
    T = w.shape[-1]
    fig = go.Figure()
    queries = range(T) if query is None else [query]
    for n, h in enumerate(heads):
        colour = HEAD_COLOURS[h % len(HEAD_COLOURS)]
        buckets: dict[int, tuple[list, list]] = {}
        for i in queries:
            row = w[n, i]
            for j in np.argsort(row)[::-1][:top_k]:
                if row[j] < min_weight:
                    break
                b = min(4, int(row[j] * 5))  # opacity bucket 0..4
                xs, ys = buckets.setdefault(b, ([], []))
                xs += [0, 1, None]
                ys += [-i, -int(j), None]
        for b, (xs, ys) in sorted(buckets.items()):
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines",
                    line=dict(color=colour, width=1 + b),
                    opacity=0.2 + 0.2 * b,
                    hoverinfo="skip",
                    showlegend=(b == max(buckets)),
                    name=f"head {h}",
                    legendgroup=f"h{h}",
                )
            )
    labels = [token_label(t) for t in tokens]
    for x, pos in ((0, "middle left"), (1, "middle right")):
        fig.add_trace(
            go.Scatter(
                x=[x] * T,
                y=[-i for i in range(T)],
                mode="text",
                text=labels,
                textposition=pos,
                hovertext=[f"{i}: {t}" for i, t in enumerate(labels)],
                hoverinfo="text",
                showlegend=False,
            )
        )
    fig.update_layout(
        height=min(2400, 120 + 20 * T),
        margin=dict(l=10, r=10, t=40, b=10),
        title=f"Lines: top {top_k} keys per query (weight ≥ {min_weight:g})",
        xaxis=dict(visible=False, range=[-0.6, 1.6]),
        yaxis=dict(visible=False),
        legend=dict(orientation="h"),
    )
    return fig


def token_focus(weights: np.ndarray, tokens: list[str], query: int, top_k: int = 15) -> go.Figure:
    """Where token `query` attends in every head of a layer: grouped bars over its top keys.

    weights: (H, T, T). Keys are the top_k by largest weight in any head, in sentence order.
    """
    row = np.asarray(weights, dtype=np.float32)[:, query, :]  # (H, T)
    keys = np.sort(np.argsort(row.max(0))[::-1][:top_k])
    cats = [positions(tokens)[j] for j in keys]
    fig = go.Figure(
        [
            go.Bar(
                x=cats,
                y=row[h, keys],
                name=f"head {h}",
                marker_color=HEAD_COLOURS[h % len(HEAD_COLOURS)],
                hovertemplate=f"head {h}: %{{x}} %{{y:.3f}}<extra></extra>",
            )
            for h in range(row.shape[0])
        ]
    )
    fig.update_layout(
        barmode="group",
        title=f"Where “{token_label(tokens[query])}” (position {query}) attends",
        xaxis=dict(title="key token", type="category"),
        yaxis=dict(title="weight", range=[0, 1]),
        height=380,
        margin=dict(l=10, r=10, t=50, b=10),
    )
    return fig


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
    ycats, yaxis = _token_axis(tokens, max_labels=40)
    lim = float(np.abs(v).max()) or 1.0
    fig = go.Figure(
        go.Heatmap(
            z=v,
            y=ycats,
            colorscale="RdBu_r",
            zmid=0,
            zmin=-lim,
            zmax=lim,
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


def _integer_heatmap(z: np.ndarray, **style) -> go.Heatmap:
    """A heatmap of a (rows, columns) array on integer axes (heads, layers)."""
    return go.Heatmap(z=z, x=list(range(z.shape[1])), y=list(range(z.shape[0])), **style)


def head_matrix(values: np.ndarray, title: str, zmax: float = 1.0, label: str = "value") -> go.Figure:
    """An (H, H) head-by-head matrix (diversity, overlap) with integer head axes."""
    v = np.asarray(values, dtype=np.float64)
    H = v.shape[0]
    fig = go.Figure(
        _integer_heatmap(
            v,
            colorscale=SCALE,
            zmin=0.0,
            zmax=zmax,
            colorbar=dict(title=label, thickness=10),
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
    """Measures against alpha: diversity and overlaps on the left axis, effective rank on the right."""
    alphas = [r["alpha"] for r in rows]
    fig = go.Figure()
    for n, key in enumerate(k for k in rows[0] if k != "alpha"):
        right = key == "effective rank"
        fig.add_trace(
            go.Scatter(
                x=alphas,
                y=[r[key] for r in rows],
                name=sup(key),
                mode="lines+markers",
                yaxis="y2" if right else "y",
                line=dict(color=HEAD_COLOURS[n], dash="dot" if right else None),
            )
        )
    if current is not None:
        fig.add_vline(x=current, line=dict(color="grey", dash="dash"))
    fig.update_layout(
        title="Distinct (alpha = 0) -> shared (alpha = 1)",
        height=380,
        margin=dict(l=10, r=10, t=50, b=10),
        xaxis=dict(title="alpha"),
        yaxis=dict(title="divergence / overlap", range=[0, 1.05]),
        yaxis2=dict(title="effective rank", overlaying="y", side="right", rangemode="tozero"),
        legend=dict(orientation="h", y=-0.25),
    )
    return fig


def atlas_heatmap(
    values: np.ndarray,
    hover: list[list[str]],
    title: str,
    zmin: float = 0.0,
    zmax: float | None = None,
    diverging: bool = False,
) -> go.Figure:
    """An (L, H) map of one per-head measure; the hover card of each head lists all its measures."""
    v = np.asarray(values, dtype=np.float64)
    L, H = v.shape
    if diverging:
        lim = float(np.abs(v).max()) or 1.0
        zmin, zmax = -lim, lim
    fig = go.Figure(
        _integer_heatmap(
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


def token_rows(rows: np.ndarray, tokens: list[str], title: str) -> go.Figure:
    """(L, T) where one token reads at each layer: layers as rows, key tokens as columns."""
    xcats, xaxis = _token_axis(tokens)
    L = rows.shape[0]
    fig = go.Figure(
        go.Heatmap(
            z=np.asarray(rows, dtype=np.float32),
            x=xcats,
            y=list(range(L)),
            colorscale=SCALE,
            zmin=0,
            hovertemplate="layer %{y} → %{x}: %{z:.3f}<extra></extra>",
            colorbar=dict(thickness=10),
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


MODEL_COLOURS = {
    "distinct": "#117733",
    "grouped": "#44AA99",
    "mqa": "#88CCEE",
    "shared": "#CC6677",
    "single": "#332288",
}


def training_curves(
    curves: dict[str, tuple[list[float], list[float]]], chance: float | None = None, title: str = "Training curves"
) -> go.Figure:
    """Loss (left) and all-targets accuracy (right) per step for each model: {kind: (losses, accs)}."""
    fig = go.Figure()
    for kind, (losses, accs) in curves.items():
        c = MODEL_COLOURS.get(kind, "#888888")
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
        legend=dict(orientation="h", y=-0.2),
    )
    return fig


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
                    marker=dict(symbol=symbols[n % 4], size=7, color=HEAD_COLOURS[n + 1], line=dict(width=2)),
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


def _panel_grid(n: int, cols: int = 4) -> tuple[int, int]:
    cols = min(cols, n)
    return -(-n // cols), cols


def _token_points(
    points: np.ndarray, names: list[str], symbol: str, colour: dict, name: str, legend: bool, size: int = 7, **style
) -> go.Scatter:
    """One marker per token (points (T, 2)), its "position: token" on hover; style overrides."""
    return go.Scatter(
        **{
            "x": points[:, 0],
            "y": points[:, 1],
            "mode": "markers",
            "hovertext": names,
            "hoverinfo": "text",
            "marker": dict(symbol=symbol, size=size, line=dict(width=1.5), **colour),
            "name": name,
            "legendgroup": name,
            "showlegend": legend,
            **style,
        }
    )


def _panel_layout(fig: go.Figure, title: str, rows: int, legend_y: float = 1.06) -> go.Figure:
    """Title, height for `rows` rows of panels, no tick labels (the axes of a 2-D picture have no units)."""
    fig.update_xaxes(showticklabels=False)
    fig.update_yaxes(showticklabels=False)
    fig.update_layout(
        title=title,
        height=60 + 260 * rows,
        margin=dict(l=10, r=10, t=80, b=10),
        legend=dict(orientation="h", y=legend_y, x=0),
    )
    return fig


def _panels(rows: int, cols: int, titles: list[str]) -> go.Figure:
    """A grid of 2-D panels, one per head."""
    from plotly.subplots import make_subplots

    return make_subplots(rows, cols, subplot_titles=titles, horizontal_spacing=0.04, vertical_spacing=0.08)


def subspace_panels(
    queries: np.ndarray,
    keys: np.ndarray,
    fidelity: np.ndarray,
    tokens: list[str],
    title: str,
    token: int | None = None,
    weights: np.ndarray | None = None,
    top_k: int = 3,
    label_max: int = 30,
) -> go.Figure:
    """One 2-D panel per head: queries (circles) and keys (open diamonds) of every token.

    queries, keys: (H, T, 2); fidelity: (H,), in each panel's title. A token has one colour in
    every panel (by position, so repeated words keep their own points). With `token`, its query
    is ringed in every panel and joined to the top_k keys it attends to in that head (weights
    (H, T, T)). Labels are drawn for up to label_max tokens (hover shows them always).
    """

    H, T = queries.shape[:2]
    rows, cols = _panel_grid(H)
    fig = _panels(rows, cols, [f"head {h} · fidelity {fidelity[h]:.2f}" for h in range(H)])
    names = [f"{i}: {token_label(t)}" for i, t in enumerate(tokens)]
    colour = dict(color=list(range(T)), colorscale=SCALE, cmin=0, cmax=max(T - 1, 1))
    text = [token_label(t) for t in tokens] if T <= label_max else None
    for h in range(H):
        r, c = h // cols + 1, h % cols + 1
        query_text = dict(mode="markers+text", text=text, textposition="top center", textfont=dict(size=9))
        fig.add_trace(
            _token_points(queries[h], names, "circle", colour, "queries", h == 0, **(query_text if text else {})), r, c
        )
        fig.add_trace(_token_points(keys[h], names, "diamond-open", colour, "keys", h == 0), r, c)
        if token is not None:
            top = [] if weights is None else np.argsort(weights[h, token])[::-1][:top_k]
            xs, ys = [], []
            for j in top:
                xs += [queries[h, token, 0], keys[h, j, 0], None]
                ys += [queries[h, token, 1], keys[h, j, 1], None]
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines",
                    line=dict(color="#CC6677", width=1.5),
                    hoverinfo="skip",
                    name=f"“{token_label(tokens[token])}” reads",
                    legendgroup="l",
                    showlegend=h == 0,
                ),
                r,
                c,
            )
            fig.add_trace(
                go.Scatter(
                    x=[queries[h, token, 0]],
                    y=[queries[h, token, 1]],
                    mode="markers+text",
                    text=[token_label(tokens[token])],
                    textposition="bottom center",
                    hoverinfo="skip",
                    marker=dict(symbol="circle-open", size=16, line=dict(width=3, color="#CC6677")),
                    name=f"query “{token_label(tokens[token])}”",
                    legendgroup="t",
                    showlegend=h == 0,
                ),
                r,
                c,
            )
    fig.update_xaxes(zeroline=True, zerolinecolor="#dddddd")
    fig.update_yaxes(zeroline=True, zerolinecolor="#dddddd")
    return _panel_layout(fig, title, rows)


def subspace_animation(frames: list[tuple[float, np.ndarray, np.ndarray]], tokens: list[str], title: str) -> go.Figure:
    """The panels along alpha, played in the browser: frames = [(alpha, queries (H, T, 2),
    keys (H, T, 2)), ...]. Axes are fixed to the range of every frame so that points move."""

    H, T = frames[0][1].shape[:2]
    rows, cols = _panel_grid(H)
    fig = _panels(rows, cols, [f"head {h}" for h in range(H)])
    names = [f"{i}: {token_label(t)}" for i, t in enumerate(tokens)]
    colour = dict(color=list(range(T)), colorscale=SCALE, cmin=0, cmax=max(T - 1, 1))
    _, q0, k0 = frames[0]
    for h in range(H):
        r, c = h // cols + 1, h % cols + 1
        for pts, symbol, name in ((q0, "circle", "queries"), (k0, "diamond-open", "keys")):
            fig.add_trace(_token_points(pts[h], names, symbol, colour, name, h == 0, size=6), r, c)
    fig.frames = [
        go.Frame(
            name=f"{alpha:.1f}", data=[go.Scatter(x=pts[h, :, 0], y=pts[h, :, 1]) for h in range(H) for pts in (q, k)]
        )
        for alpha, q, k in frames
    ]
    for h in range(H):  # one range per panel, wide enough for every frame
        every = np.concatenate([np.concatenate([q[h], k[h]]) for _, q, k in frames])  # (frames*2T, 2)
        lo, hi = every.min(0), every.max(0)
        pad = 0.05 * (hi - lo) + 1e-6
        suffix = "" if h == 0 else str(h + 1)
        fig.layout[f"xaxis{suffix}"].update(range=[lo[0] - pad[0], hi[0] + pad[0]], showticklabels=False)
        fig.layout[f"yaxis{suffix}"].update(range=[lo[1] - pad[1], hi[1] + pad[1]], showticklabels=False)
    steps = [
        dict(
            label=f"{alpha:.1f}",
            method="animate",
            args=[
                [f"{alpha:.1f}"],
                dict(mode="immediate", frame=dict(duration=0, redraw=False), transition=dict(duration=0)),
            ],
        )
        for alpha, _, _ in frames
    ]
    fig.update_layout(
        title=title,
        height=140 + 260 * rows,
        margin=dict(l=10, r=10, t=80, b=10),
        legend=dict(orientation="h", y=1.06, x=0),
        updatemenus=[
            dict(
                type="buttons",
                direction="left",
                x=0,
                y=-0.02,
                xanchor="left",
                yanchor="top",
                buttons=[
                    dict(
                        label="▶ Play",
                        method="animate",
                        args=[
                            None,
                            dict(
                                frame=dict(duration=400, redraw=False), fromcurrent=True, transition=dict(duration=250)
                            ),
                        ],
                    )
                ],
            )
        ],
        sliders=[
            dict(active=0, steps=steps, x=0.12, y=-0.02, len=0.88, yanchor="top", currentvalue=dict(prefix="alpha = "))
        ],
    )
    return fig


KIND_COLOURS = {"special": "#332288", "punctuation": "#DDCC77"}


def pool_panels(
    queries: np.ndarray,
    keys: np.ndarray,
    fidelity: np.ndarray,
    tokens: list[str],
    kinds: list[str],
    position: np.ndarray,
    own: np.ndarray,
    title: str,
) -> go.Figure:
    """Many sentences in one picture per head: queries (H, N, 2) as dots, keys as open diamonds.

    Words are coloured by their relative position in their sentence (0 = start, 1 = end);
    special tokens and punctuation have a colour each; the learner's tokens (own, (N,) bool)
    are drawn larger with their labels on hover.
    """

    H = queries.shape[0]
    rows, cols = _panel_grid(H)
    fig = _panels(rows, cols, [f"head {h} · fidelity {fidelity[h]:.2f}" for h in range(H)])
    hover = [f"{token_label(t)} ({k}{', yours' if o else ''})" for t, k, o in zip(tokens, kinds, own)]
    kind = np.array(kinds)
    groups = [("words", kind == "word"), ("[CLS], [SEP]", kind == "special"), ("punctuation", kind == "punctuation")]
    for h in range(H):
        r, c = h // cols + 1, h % cols + 1
        for label, mask in groups:
            idx = np.flatnonzero(mask)
            if label == "words":
                style = dict(color=position[idx], colorscale=SCALE, cmin=0, cmax=1)
            else:
                style = dict(color=KIND_COLOURS["special" if label.startswith("[") else "punctuation"])
            for pts, symbol, part in ((queries, "circle", "query"), (keys, "diamond-open", "key")):
                fig.add_trace(
                    go.Scatter(
                        x=pts[h, idx, 0],
                        y=pts[h, idx, 1],
                        mode="markers",
                        hovertext=[hover[i] for i in idx],
                        hoverinfo="text",
                        name=f"{label}: {part}",
                        legendgroup=f"{label}{part}",
                        showlegend=h == 0,
                        marker=dict(
                            symbol=symbol, size=np.where(own[idx], 9, 4), line=dict(width=1), opacity=0.8, **style
                        ),
                    ),
                    r,
                    c,
                )
    return _panel_layout(fig, title, rows, legend_y=1.08)


def spectra_chart(per_head: np.ndarray, stacked: dict[str, np.ndarray], reference: np.ndarray) -> go.Figure:
    """Left: each head's singular values of W_i^Q W_i^K^T. Right: cumulative share of squared
    singular values of the stacked projections, against a random matrix of the same size."""
    from plotly.subplots import make_subplots

    fig = make_subplots(
        1,
        2,
        subplot_titles=[
            "Each head's W<sub>i</sub><sup>Q</sup> (W<sub>i</sub><sup>K</sup>)<sup>T</sup>: singular values",
            "Stacked projections: cumulative energy",
        ],
    )
    for h, s in enumerate(per_head):
        fig.add_trace(
            go.Scatter(
                y=s,
                mode="lines",
                name=f"head {h}",
                line=dict(color=HEAD_COLOURS[h % 12], width=1),
                showlegend=False,
                hovertemplate=f"head {h}, direction %{{x}}: %{{y:.3f}}<extra></extra>",
            ),
            1,
            1,
        )
    for n, (name, s) in enumerate([*stacked.items(), ("random matrix", reference)]):
        energy = np.cumsum(s.astype(np.float64) ** 2) / np.sum(s.astype(np.float64) ** 2)
        fig.add_trace(
            go.Scatter(
                y=energy,
                mode="lines",
                name=name,
                line=dict(color=HEAD_COLOURS[[1, 3, 11][n % 3]], dash="dot" if n == 2 else None),
            ),
            1,
            2,
        )
    fig.update_xaxes(title_text="direction (sorted)", row=1, col=1)
    fig.update_xaxes(title_text="directions kept", row=1, col=2)
    fig.update_yaxes(title_text="singular value", row=1, col=1)
    fig.update_yaxes(title_text="share of energy", range=[0, 1.02], row=1, col=2)
    fig.update_layout(height=360, margin=dict(l=10, r=10, t=60, b=10), legend=dict(orientation="h", y=-0.25))
    return fig


def ladder_chart(rows: list) -> go.Figure:
    """The ladder's rungs (ladder.RungMeasures) left to right: sentence and layer-output cosine
    (left axis), head diversity (right axis)."""
    names = [r.rung.name for r in rows]
    fig = go.Figure()
    for n, (key, label) in enumerate([("sentence_cosine", "sentence cosine"), ("layer_cosine", "layer output cosine")]):
        fig.add_trace(
            go.Scatter(
                x=names,
                y=[getattr(r, key) for r in rows],
                name=label,
                mode="lines+markers",
                line=dict(color=HEAD_COLOURS[3 + n]),
            )
        )
    fig.add_trace(
        go.Bar(
            x=names,
            y=[r.diversity for r in rows],
            name="head diversity (JS)",
            yaxis="y2",
            marker_color=HEAD_COLOURS[0],
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
    fig = go.Figure(go.Scatter(y=losses, mode="lines", line=dict(color=HEAD_COLOURS[3])))
    fig.update_layout(
        title=title,
        height=300,
        margin=dict(l=10, r=10, t=50, b=10),
        xaxis=dict(title="step"),
        yaxis=dict(title="relative error", type="log"),
    )
    return fig


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
        for kind, curve, dash, colour in (
            ("held out", f.held_out, None, HEAD_COLOURS[3]),
            ("in sample", f.in_sample, "dash", HEAD_COLOURS[1]),
        ):
            fig.add_trace(
                go.Scatter(
                    x=curve.removed,
                    y=np.subtract(curve.spearman, curve.spearman[0]),
                    name=f"{kind}, part {n + 1} ({len(f.pairs)} pairs)",
                    mode="lines+markers",
                    marker=dict(symbol=["circle", "diamond", "square", "triangle-up"][n % 4]),
                    line=dict(color=colour, dash=dash, width=3 if kind == "held out" else 1.5),
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
