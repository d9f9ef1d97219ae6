"""The Subspaces page: each head's 2-D query/key picture, the path to sharing as an animation,
many sentences pooled, and the singular values of the projections.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from mha.plots.common import (
    SCALE,
    head_colour,
    panel_grid,
    panel_layout,
    panels,
    role_colour,
    sup,
    token_label,
    token_points,
    token_text,
)
from mha.plots.describe import with_words


def _read(row: np.ndarray, top_k: int) -> np.ndarray:
    """The keys a query reads most (its top_k weights), leaving out keys it cannot read at all
    (weight 0: a causal model's later tokens)."""
    order = np.argsort(row)[::-1][:top_k]
    return order[row[order] > 0]


def _by_position(T: int) -> dict:
    """Marker colours for T tokens, by position 0..T-1. An array, not a list: Plotly checks a
    list's items one by one (at 512 tokens, most of a panel figure's time)."""
    return dict(color=np.arange(T), colorscale=SCALE, cmin=0, cmax=max(T - 1, 1))


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
    heads: list[int] | None = None,
    spread: np.ndarray | None = None,
) -> go.Figure:
    """One 2-D panel per head: queries (circles) and keys (open diamonds) of every token.
    `heads` names the panels' heads (default 0, 1, ...).

    queries, keys: (H, T, 2); fidelity: (H,), in each panel's title, and the score spread (H,) if
    given (each panel has its own scale: the spread says how strong its scores really are). A token has one colour in
    every panel (by position, so repeated words keep their own points). With `token`, its query
    is ringed in every panel and joined to the top_k keys it attends to in that head (weights
    (H, T, T)). Every token is labelled in up to 4 panels of up to label_max tokens; in more panels
    only the followed token and the keys it reads are (hover names every point).
    """

    H, T = queries.shape[:2]
    rows, cols = panel_grid(H)
    shown = heads if heads is not None else list(range(H))
    extra = [f"<br>spread {spread[h]:.2f}" if spread is not None else "" for h in range(H)]
    fig = panels(rows, cols, [f"head {shown[h]}<br>fidelity {fidelity[h]:.2f}{extra[h]}" for h in range(H)])
    names = [f"{i}: {token_label(t)}" for i, t in enumerate(tokens)]
    colour = _by_position(T)
    # every token named in a few panels; in a grid of many, the followed token and the keys it reads
    text = [token_label(t) for t in tokens] if T <= label_max and H <= 4 else None
    for h in range(H):
        r, c = h // cols + 1, h % cols + 1
        query_text = dict(mode="markers+text", text=text, textposition="top center", textfont=dict(size=12))
        fig.add_trace(
            token_points(queries[h], names, "circle", colour, "queries", h == 0, **(query_text if text else {})), r, c
        )
        fig.add_trace(token_points(keys[h], names, "diamond-open", colour, "keys", h == 0), r, c)
        if token is not None:
            top = [] if weights is None else _read(weights[h, token], top_k)
            xs, ys, read = [], [], []
            for j in top:
                xs += [queries[h, token, 0], keys[h, j, 0], None]
                ys += [queries[h, token, 1], keys[h, j, 1], None]
                read += ["", "" if text else token_label(tokens[j]), ""]  # the key's name at the line's end
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines+text",
                    text=read,
                    textposition="top center",
                    line=dict(color=role_colour("followed token"), width=1.5),
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
                    marker=dict(  # an open symbol is drawn in the marker's colour: set it, or it cycles
                        symbol="circle-open", size=16, color=role_colour("followed token"), line=dict(width=3)
                    ),
                    name=f"query “{token_label(tokens[token])}”",
                    legendgroup="t",
                    showlegend=h == 0,
                ),
                r,
                c,
            )
    fig.update_xaxes(zeroline=True, zerolinecolor="#dddddd")
    fig.update_yaxes(zeroline=True, zerolinecolor="#dddddd")
    words = (
        f"{H} panels, one per head ({', '.join(f'head {s}' for s in shown)}): each of the {T} tokens as a query "
        "(a filled circle) and as a key (an open diamond), coloured by its position in the sentence. Fidelity (the "
        f"share of the head's scores the picture keeps): {fidelity.min():.2f} to {fidelity.max():.2f}."
    )
    if token is not None and weights is not None:
        label = [token_text(t) for t in tokens]
        reads = [
            f"head {shown[h]}: "
            + ", ".join(f"“{label[j]}” {weights[h, token, j]:.2f}" for j in _read(weights[h, token], top_k))
            for h in range(min(H, 4))
        ]
        words += f" “{label[token]}” (ringed) reads most, in " + "; ".join(reads) + ("; ..." if H > 4 else ".")
    return with_words(panel_layout(fig, title, rows), words)


ANIMATION_COLUMNS, ANIMATION_ROW = 6, 190  # panels to a row, and a row's height (px), of subspace_animation


def subspace_animation(frames: list[tuple[float, np.ndarray, np.ndarray]], tokens: list[str], title: str) -> go.Figure:
    """The panels along alpha, played in the browser: frames = [(alpha, queries (H, T, 2),
    keys (H, T, 2)), ...]. Axes are fixed to the range of every frame so that points move."""

    H, T = frames[0][1].shape[:2]
    rows, cols = panel_grid(H, ANIMATION_COLUMNS)  # 12 heads in 2 rows: every panel and Play on one 1366 x 768 screen
    fig = panels(rows, cols, [f"head {h}" for h in range(H)])
    names = [f"{i}: {token_label(t)}" for i, t in enumerate(tokens)]
    colour = _by_position(T)
    _, q0, k0 = frames[0]
    for h in range(H):
        r, c = h // cols + 1, h % cols + 1
        for pts, symbol, name in ((q0, "circle", "queries"), (k0, "diamond-open", "keys")):
            fig.add_trace(token_points(pts[h], names, symbol, colour, name, h == 0, size=6), r, c)
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
    # per frame: the largest distance (in the plane) of a head's point from head 0's same point
    apart = [float(np.linalg.norm(p - p[:1], axis=-1).max()) for p in (np.concatenate([q, k], 1) for _, q, k in frames)]
    with_words(
        fig,
        f"{H} panels, one per head: the queries (circles) and keys (open diamonds) of {T} tokens, in {len(frames)} "
        f"frames from alpha = {frames[0][0]:.1f} to {frames[-1][0]:.1f} (press Play or drag the slider). A head's "
        f"points sit up to {apart[0]:.3g} from head 0's at alpha = {frames[0][0]:.1f} and up to {apart[-1]:.3g} at "
        f"alpha = {frames[-1][0]:.1f}" + (" (the same picture in every panel)." if apart[-1] < 1e-6 else "."),
    )
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
    fig.update_layout(  # Play and the slider above the panels, the legend under them
        title=title,
        height=230 + ANIMATION_ROW * rows,
        margin=dict(l=10, r=10, t=170, b=40),
        legend=dict(orientation="h", y=-0.02, yanchor="top", x=0),
        updatemenus=[
            dict(
                type="buttons",
                direction="left",
                x=0,
                y=1.0,
                xanchor="left",
                yanchor="bottom",
                pad=dict(b=40),
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
            dict(
                active=0,
                steps=steps,
                x=0.14,
                y=1.0,
                len=0.86,
                yanchor="bottom",
                pad=dict(b=30, t=0),
                currentvalue=dict(prefix="alpha = "),
            )
        ],
    )
    return fig


def pool_panels(
    queries: np.ndarray,
    keys: np.ndarray,
    fidelity: np.ndarray,
    tokens: list[str],
    kinds: list[str],
    position: np.ndarray,
    own: np.ndarray,
    title: str,
    special: str = "[CLS], [SEP]",
) -> go.Figure:
    """Many sentences in one picture per head: queries (H, N, 2) as dots, keys as open diamonds;
    `special` names the tokens of kind "special" (a decoder's: "first tokens").

    Words are coloured by their relative position in their sentence (0 = start, 1 = end);
    special tokens and punctuation have a colour each; the learner's tokens (own, (N,) bool)
    are drawn larger with their labels on hover.
    """

    H = queries.shape[0]
    rows, cols = panel_grid(H)
    fig = panels(rows, cols, [f"head {h}<br>fidelity {fidelity[h]:.2f}" for h in range(H)])
    hover = [f"{token_label(t)} ({k}{', yours' if o else ''})" for t, k, o in zip(tokens, kinds, own)]
    kind = np.array(kinds)
    groups = [("words", kind == "word"), (special, kind == "special"), ("punctuation", kind == "punctuation")]
    for h in range(H):
        r, c = h // cols + 1, h % cols + 1
        for label, mask in groups:
            idx = np.flatnonzero(mask)
            if label == "words":
                style = dict(color=position[idx], colorscale=SCALE, cmin=0, cmax=1)
            else:
                style = dict(color=role_colour("special" if label == special else "punctuation"))
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
    return with_words(
        panel_layout(fig, title, rows),
        f"{H} panels, one per head: the queries (dots) and keys (open diamonds) of {len(tokens)} tokens, yours "
        f"({int(own.sum())}, large markers) and the bundled sentences' ({int((~own).sum())}, small). "
        f"Words coloured by where they sit in their sentence (start to end); {special} "
        f"and punctuation each have a colour. Fidelity {fidelity.min():.2f} to {fidelity.max():.2f}.",
    )


def spectra_chart(
    per_head: np.ndarray, stacked: dict[str, np.ndarray], reference: np.ndarray, key: str | None = None
) -> go.Figure:
    """Left: each head's singular values of W_i^Q W_i^K^T (key: the W^K a head reads, in HTML). Right:
    cumulative share of squared singular values of the stacked projections ({"stacked W^Q": s, ...}),
    against a random matrix of the same size."""
    from plotly.subplots import make_subplots

    key = key or "W<sub>i</sub><sup>K</sup>"  # a head's own W^K unless the model shares it
    fig = make_subplots(
        1,
        2,
        subplot_titles=[
            f"Each head's W<sub>i</sub><sup>Q</sup> ({key})<sup>T</sup>:<br>singular values,<br>a line per head",
            "Stacked projections:<br>cumulative energy",
        ],
    )
    for h, s in enumerate(per_head):
        fig.add_trace(
            go.Scatter(
                y=s,
                mode="lines",
                name=f"head {h}",
                line=dict(color=head_colour(h), width=1),
                showlegend=False,
                hovertemplate=f"head {h}, direction %{{x}}: %{{y:.3f}}<extra></extra>",
            ),
            1,
            1,
        )
    for name, s in [*stacked.items(), ("random matrix", reference)]:
        energy = np.cumsum(s.astype(np.float64) ** 2) / np.sum(s.astype(np.float64) ** 2)
        fig.add_trace(
            go.Scatter(
                x=np.arange(1, len(energy) + 1),
                y=energy,
                mode="lines",
                name=sup(name),
                line=dict(
                    color=role_colour(name),
                    dash="dot" if name.startswith("random") else "dash" if "random directions" in name else None,
                ),
            ),
            1,
            2,
        )
    fig.update_xaxes(title_text="direction (sorted)", row=1, col=1)
    fig.update_xaxes(title_text="directions kept", row=1, col=2)
    fig.update_yaxes(title_text="singular value", row=1, col=1)
    fig.update_yaxes(title_text="share of energy", range=[0, 1.02], row=1, col=2)
    fig.update_layout(
        title="Singular values: each head's scores, and the stacked projections",
        height=460,
        margin=dict(l=10, r=10, t=150, b=10),
        # the legend names the right panel's lines: inside it, in the corner the rising curves leave empty
        legend=dict(x=1, y=0.02, xanchor="right", yanchor="bottom", bgcolor="rgba(255, 255, 255, 0.85)"),
    )
    return fig
