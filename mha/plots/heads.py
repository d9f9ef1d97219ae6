"""The BERT heads page: one head as a heatmap or BertViz-style lines, every layer x head tiled
in one figure, the heads of a layer, where one token attends in every head.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from mha.plots.common import SCALE, head_colour, positions, tile_axis, tile_means, token_axis, token_label, wrap
from mha.plots.describe import with_words


def attention_heatmap(
    weights: np.ndarray,
    tokens: list[str],
    title: str = "",
    zmax: float | None = 1.0,
    height: int | None = None,
    key_tokens: list[str] | None = None,
    key_labels: bool = True,
    window: int | None = None,
) -> go.Figure:
    """One head's attention (Tq, Tk): row = query token, column = key token.

    key_tokens defaults to tokens (a square map); give it for a block such as A->B. key_labels
    False: a square map too narrow for a label per column (three side by side) names its keys by
    the rows' order instead of labels run into one another. window: a sliding layer's W on a square
    map of consecutive tokens; when the map is taller than W, a dashed line marks where each row
    stops looking (query i reads keys i - W + 1..i).
    """
    ycats, yaxis = token_axis(tokens)
    xcats, xaxis = token_axis(key_tokens if key_tokens is not None else tokens)
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
        xaxis=(
            dict(title="key (attended to)", side="top", **xaxis)
            if key_labels
            else dict(title="key: the rows' order", side="top", showticklabels=False, type="category")
        ),
        yaxis=dict(title="query (attending)", autorange="reversed", **yaxis),
        height=height or min(900, 260 + 18 * len(tokens)),
        margin=dict(l=10, r=10, t=80, b=10),
    )
    if window is not None and len(tokens) > window:
        fig.add_shape(type="path", path=window_edge(len(tokens), window), line=dict(color="#d62728", dash="dash"))
    return fig


def window_edge(T: int, window: int) -> str:
    """SVG path (category-index coordinates) of a window's left edge on a T x T map: row i's first
    readable key is i - W + 1, so the edge runs at x = i - W + 0.5 from row W on, one step per row."""
    points = []
    for i in range(window, T):
        x = i - window + 0.5  # between key i - W (outside) and i - W + 1 (read)
        points += [(x, i - 0.5), (x, i + 0.5)]
    return "M " + " L ".join(f"{x},{y}" for x, y in points)


TILE = 40  # the model view pools each head's map to at most TILE x TILE cells


def tiled_heatmap(
    maps: np.ndarray,
    row_labels: list[str],
    col_labels: list[str],
    title: str = "",
    tile: int = TILE,
    zmax: float = 1.0,
    name=None,
    labels: str = "",
) -> go.Figure:
    """A grid of attention maps (R, K, T, T) drawn as ONE heatmap (not R*K subplots); its words
    (describe) name the most focused and the most spread map, `name(r, k)` (default "row, column").

    Each map is mean-pooled to at most `tile` cells a side and quantised to 0..250 (uint8),
    so the figure stays small at 512 tokens. White lines separate the tiles.
    """
    R, K = maps.shape[:2]
    pooled = tile_means(np.asarray(maps, dtype=np.float32), tile)  # (R, K, s, s)
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
    full = np.asarray(maps, dtype=np.float32)
    T = full.shape[-1]
    # every key after its query at 0: a causal map (one map at a time: no copy of all of them)
    causal = T > 1 and not any(np.triu(m, 1).any() for m in full.reshape(-1, T, T))
    rows = full[..., 1:, :] if causal else full  # a causal first row reads only itself: weight 1, no choice
    sharp = np.where(full.any((-1, -2)), rows.max(-1).mean(-1), np.nan)  # (R, K): mean largest weight per row
    r, k = np.unravel_index(np.nanargmax(sharp), sharp.shape)  # an empty tile (a grid's padding) is neither
    r2, k2 = np.unravel_index(np.nanargmin(sharp), sharp.shape)
    on_first = float((rows[r, k].argmax(-1) == 0).mean())  # the sharpest map's largest weights on key 0
    name = name or (lambda r, k: f"{row_labels[r]}, {col_labels[k]}")
    with_words(
        fig,
        f"{R} rows ({row_labels[0]} to {row_labels[-1]}) by {K} columns ({col_labels[0]} to {col_labels[-1]}) of "
        f"attention maps, each a {maps.shape[-1]} x {maps.shape[-1]} grid of weights (rows: queries, columns: keys; "
        f"colour: weight, 0 to {zmax:.2g}). Most focused: {name(r, k)}, where a token's largest weight is "
        f"{sharp[r, k]:.2f} on average"
        + (f" (on the first token for {on_first:.0%} of its tokens)" if on_first > 0.5 else "")
        + f"; most spread: {name(r2, k2)} ({sharp[r2, k2]:.2f})"
        + (" (the first query, which can read only itself, left out)." if causal else "."),
    )
    inside = (
        "each tile: rows = queries, columns = keys"
        + (f" (averaged to {s} x {s} cells of the {maps.shape[-1]} tokens)" if s < maps.shape[-1] else "")
        + labels
    )
    inside = wrap(inside, 56)
    fig.add_annotation(  # under the grid: the head labels run along its top
        text=inside,
        xref="paper",
        yref="paper",
        x=0,
        y=0,
        yshift=-8,
        yanchor="top",
        xanchor="left",
        showarrow=False,
        font=dict(size=12),
    )
    fig.update_layout(
        title=title or "Attention maps",
        shapes=lines,
        height=min(1100, 120 + 70 * R),
        margin=dict(l=10, r=10, t=60, b=36 + 18 * inside.count("<br>")),
        xaxis=tile_axis([(k + 0.5) * s - 0.5 for k in range(K)], col_labels, side="top"),
        yaxis=tile_axis([(r + 0.5) * s - 0.5 for r in range(R)], row_labels, autorange="reversed"),
    )
    return fig


def head_names(H: int, groups: int | None = None) -> list[str]:
    """ "head h", with its K/V group when the heads share K and V in `groups` groups."""
    if not groups or groups == H:
        return [f"head {h}" for h in range(H)]
    return [f"head {h} (K/V {h // (H // groups)})" for h in range(H)]


def model_view(attentions: np.ndarray, tile: int = TILE, groups: int | None = None) -> go.Figure:
    """Every layer x head of a model (L, H, T, T) at a glance, one shared 0..1 colour scale; with
    `groups`, each head's column names the K/V group it reads."""
    L, H = attentions.shape[:2]
    return tiled_heatmap(
        attentions, [f"layer {l}" for l in range(L)], head_names(H, groups), "All layers x heads", tile
    )


def head_grid(
    weights: np.ndarray, title: str = "", cols: int = 6, tile: int = TILE, groups: int | None = None
) -> go.Figure:
    """The H heads of one layer (H, T, T) as a grid of tiles, `cols` per row; with `groups` (K/V
    groups), one row per group: the heads of a row read one K and one V."""
    H, T = weights.shape[0], weights.shape[-1]
    if groups and groups < H:
        cols = H // groups
    else:
        cols = next((c for c in (cols, 4, 5, 3) if c <= H and H % c == 0), min(cols, H))  # no empty tile if avoidable
    rows = -(-H // cols)
    padded = np.zeros((rows * cols, T, T), dtype=np.float32)
    padded[:H] = weights
    grid = padded.reshape(rows, cols, T, T)  # (rows, cols, T, T)
    return tiled_heatmap(
        grid,
        [
            f"heads {r * cols}-{min(H, (r + 1) * cols) - 1}" + (f" (K/V {r})" if groups and groups < H else "")
            for r in range(rows)
        ],
        [f"+{c}" for c in range(cols)],
        title,
        tile,
        name=lambda r, k: f"head {r * cols + k}",
        labels="; a tile's head: its row's first plus its column's +n",
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
        colour = head_colour(h)
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
    strongest = []
    for n, h in enumerate(heads[:4]):
        i, j = np.unravel_index(int(np.argmax(w[n, list(queries)])), (len(queries), T))
        i = list(queries)[i]
        strongest.append(f"head {h}, “{labels[i]}” ({i}) to “{labels[j]}” ({j}), {w[n, i, j]:.2f}")
    with_words(
        fig,
        f"Lines from {'each of the ' + str(T) + ' query tokens' if query is None else '“' + labels[query] + '”'} "
        f"(left) to its strongest keys (right) in {len(heads)} head{'s' if len(heads) > 1 else ''}; the strongest "
        "link"
        + (" per head" if len(heads) > 1 else "")
        + ": "
        + "; ".join(strongest)
        + ("; ..." if len(heads) > 4 else "."),
    )
    fig.update_layout(
        height=min(2400, 120 + 20 * T),
        margin=dict(l=10, r=10, t=70, b=10),
        title=dict(
            text=f"Lines: each query's top {top_k} keys",
            subtitle=dict(
                text=f"left: queries, right: keys (weight ≥ {min_weight:g}); colour: head; width and opacity: weight",
                font=dict(size=12),
            ),
        ),
        xaxis=dict(visible=False, range=[-0.6, 1.6]),
        yaxis=dict(visible=False),
        legend=dict(orientation="h"),
    )
    return fig


def token_focus(weights: np.ndarray, tokens: list[str], query: int, top_k: int = 15) -> go.Figure:
    """Where token `query` attends in every head of a layer: grouped bars over its top keys.

    weights: (H, T, T). Keys are the top_k by largest weight in any head (none with weight 0 in
    every head), in sentence order.
    """
    row = np.asarray(weights, dtype=np.float32)[:, query, :]  # (H, T)
    best = row.max(0)  # (T,): a key no head reads at all (a causal model's later tokens) is left out
    keys = np.sort([j for j in np.argsort(best)[::-1][:top_k] if best[j] > 0])
    cats = [positions(tokens)[j] for j in keys]
    fig = go.Figure(
        [
            go.Bar(
                x=cats,
                y=row[h, keys],
                name=f"head {h}",
                marker_color=head_colour(h),
                hovertemplate=f"head {h}: %{{x}} %{{y:.3f}}<extra></extra>",
            )
            for h in range(row.shape[0])
        ]
    )
    fig.update_layout(
        barmode="group",
        title=f"Where “{token_label(tokens[query])}” (position {query}) attends"
        + (f": its {len(keys)} strongest keys of {len(tokens)}" if len(keys) < len(tokens) else ""),
        xaxis=dict(title="key token", type="category"),
        yaxis=dict(title="weight", range=[0, 1]),
        height=380,
        margin=dict(l=10, r=10, t=50, b=10),
    )
    return fig
