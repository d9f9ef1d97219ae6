"""Shared by every figure module: token axes (repeated tokens keep their own row), the colour
palette and named colour roles, tiles for many maps in one heatmap, grids of 2-D panels.
"""

from __future__ import annotations

import html
import re
import textwrap

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

SCALE = "Viridis"
WRAP = 40  # characters of a chart's title line: 14 px in half of 1280 px; 12 px on a phone (ui/style.css)
INK = "#1a1a1a"  # every chart's text: 17:1 on white (WCAG 2 AA asks 4.5:1 of text)
TEMPLATE = "plotly_white"
pio.templates.default = TEMPLATE  # every new figure starts on it: setting it again costs ~12 ms a figure


def readable(fig: go.Figure) -> go.Figure:
    """A figure's text dark and large enough to read on a projector and a phone: black-ish (INK)
    on white, 14 px unless a label sets its own size (12 px where many short labels share a
    panel); Plotly's plain white template, not the host's grey one."""
    if fig.layout.template.layout.plot_bgcolor != "white":  # a figure made with another template
        fig.update_layout(template=TEMPLATE)
    fig.update_layout(font=dict(color=INK, size=14), hoverlabel=dict(font_size=14))
    title = fig.layout.title
    lines = 0
    for part in (title, title.subtitle):
        if part.text:
            part.text = wrap(part.text)
            lines += part.text.count("<br>") + 1
    if lines > 1:  # each further line of the title gets its own room above the plot
        top = fig.layout.margin.t if fig.layout.margin.t is not None else 80
        more = 24 * (lines - 1)  # Plotly anchors a title's middle line, not its first, at yanchor="top"
        fig.update_layout(margin_t=top + 2 * more, title=dict(yref="container", y=1, yanchor="top", pad_t=12 + more))
    return fig


def legend_below(fig: go.Figure) -> go.Figure:
    """A horizontal legend at the bottom of the figure itself (yref "container"): Plotly then keeps the
    plot and its x axis's title above it however many lines the legend wraps onto. A legend at a fraction
    of the plot's height rose into the axis title on a phone, where it wrapped onto six lines."""
    fig.update_layout(legend=dict(orientation="h", x=0, xanchor="left", yref="container", y=0, yanchor="bottom"))
    return fig


def wrap(text: str, width: int = WRAP) -> str:
    """A label broken into lines of at most `width` characters (Plotly never wraps text itself):
    a chart's title must fit a phone's width and half a projector's."""
    if "<br>" in text or len(text) <= width:
        return text
    return "<br>".join(textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False))


def sup(text: str) -> str:
    """Plain maths in a chart label typeset as Plotly's HTML: W^Q -> W<sup>Q</sup>."""
    return re.sub(r"\^(\w)", r"<sup>\1</sup>", text)


def token_text(token: str) -> str:
    """A token as a learner reads it in a sentence: a byte-level BPE token's leading space (the word
    boundary a GPT-2 or Llama tokenizer keeps in the token, " she") is not shown; a token of spaces
    only is shown as ␣."""
    bare = token.lstrip(" ")
    return bare if bare else "␣"


def token_label(token: str) -> str:
    """A token as literal text for Plotly (which renders a few HTML tags): token_text with &, <, > escaped."""
    return html.escape(token_text(token), quote=False)


def positions(tokens: list[str]) -> list[str]:
    """Unique axis categories "i: token", so repeated tokens keep their own row and column."""
    return [f"{i}: {token_label(t)}" for i, t in enumerate(tokens)]


def token_axis(tokens: list[str], max_labels: int = 60) -> tuple[list[str], dict]:
    """Unique categories for one axis and the tick settings that show the plain tokens."""
    cats = positions(tokens)
    labels = [token_label(t) for t in tokens]
    k = max(1, int(np.ceil(len(tokens) / max_labels)))  # too many to read: every k-th label
    return cats, dict(tickmode="array", tickvals=cats[::k], ticktext=labels[::k], type="category")


PALETTE = [  # Plotly's "Safe" qualitative palette (colour-blind safe)
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

ROLE_COLOURS = {  # a series that means the same thing has the same colour on every page
    "W^Q": "#CC6677",
    "W^K": "#117733",
    "W^V": "#DDCC77",
    "diversity": "#88CCEE",
    "effective number of heads": "#332288",
    "entropy": "#AA4499",
    "sentence cosine": "#117733",
    "layer output cosine": "#332288",
    "held out": "#117733",
    "in sample": "#CC6677",
    "loss": "#117733",
    "random": "#888888",
    "followed token": "#CC6677",
    # the models of the why-many-heads experiment
    "distinct": "#117733",
    "grouped": "#44AA99",
    "mqa": "#88CCEE",
    "shared": "#CC6677",
    "single": "#332288",
    # unlike any colour of the Viridis position scale they sit beside (dark purple to yellow)
    "special": "#AA4499",
    "punctuation": "#661100",
}


def head_colour(h: int) -> str:
    """Head h's colour (the palette, cycled): the same head has the same colour in every view."""
    return PALETTE[h % len(PALETTE)]


def role_colour(name: str) -> str:
    """The colour of the first role (ROLE_COLOURS) named in a series name: "subspace overlap W^K" -> W^K's."""
    return next((c for role, c in ROLE_COLOURS.items() if role in name), ROLE_COLOURS["random"])


def tile_means(att: np.ndarray, size: int) -> np.ndarray:
    """Mean-pool the last two axes (..., T, T) to (..., s, s) with s = min(T, size)."""
    T = att.shape[-1]
    if T <= size:
        return att
    edges = np.linspace(0, T, size + 1).round().astype(int)
    rows = np.add.reduceat(att, edges[:-1], axis=-2) / np.diff(edges)[:, None]  # (..., s, T)
    return np.add.reduceat(rows, edges[:-1], axis=-1) / np.diff(edges)  # (..., s, s)


def tile_axis(centres: list[float], labels: list[str], **extra) -> dict:
    """An axis labelled at the centre of each tile, without grid lines."""
    return dict(tickmode="array", tickvals=centres, ticktext=labels, showgrid=False, zeroline=False, **extra)


def integer_heatmap(z: np.ndarray, **style) -> go.Heatmap:
    """A heatmap of a (rows, columns) array on integer axes (heads, layers)."""
    return go.Heatmap(z=z, x=list(range(z.shape[1])), y=list(range(z.shape[0])), **style)


def panel_grid(n: int, cols: int = 3) -> tuple[int, int]:
    """(rows, columns) for n panels, at most `cols` to a row (three: a panel's title fits a phone)."""
    cols = min(cols, n)
    return -(-n // cols), cols


def token_points(
    points: np.ndarray, names: list[str], symbol: str, colour: dict, name: str, legend: bool, size: int = 7, **style
) -> go.Scatter:
    """One marker per token (points (T, 2)), its "position: token" on hover; style overrides."""
    return go.Scatter(
        **{
            "x": points[:, 0],
            "y": points[:, 1],
            "mode": "markers",
            "hovertext": np.asarray(names),  # an array: Plotly checks a list item by item
            "hoverinfo": "text",
            "marker": dict(symbol=symbol, size=size, line=dict(width=1.5), **colour),
            "name": name,
            "legendgroup": name,
            "showlegend": legend,
            **style,
        }
    )


def panel_layout(fig: go.Figure, title: str, rows: int) -> go.Figure:
    """Title, height for `rows` rows of panels, the legend below them (never over the title), no
    tick labels (the axes of a 2-D picture have no units)."""
    fig.update_xaxes(showticklabels=False)
    fig.update_yaxes(showticklabels=False)
    fig.update_layout(
        title=title,
        height=120 + 260 * rows,
        margin=dict(l=10, r=10, t=70, b=60),
        legend=dict(orientation="h", y=-0.02, yanchor="top", x=0),
    )
    return fig


def panels(rows: int, cols: int, titles: list[str]) -> go.Figure:
    """A grid of 2-D panels, one per head."""
    from plotly.subplots import make_subplots

    fig = make_subplots(rows, cols, subplot_titles=titles, horizontal_spacing=0.04, vertical_spacing=0.1)
    fig.update_annotations(font_size=12)  # the panels' titles: short lines that fit a panel on a phone
    return fig
