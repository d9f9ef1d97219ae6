"""A chart in words, read from the figure's own data: its text alternative (what it shows and its
key numbers) for a learner who cannot see it, or cannot see it well (WCAG 1.1.1, non-text content).
"""

from __future__ import annotations

import html
import re

import numpy as np
import plotly.graph_objects as go

SYMBOLS = {"circle": "circles", "diamond-open": "open diamonds", "circle-open": "rings", "square": "squares"}


def plain(text: object) -> str:
    """Plotly's label markup as plain text: W<sup>Q</sup> -> W^Q, <b>x</b> -> x, &lt; -> <."""
    text = re.sub(r"<sup>(.*?)</sup>", r"^\1", "" if text is None else str(text))
    text = re.sub(r"<sub>(.*?)</sub>", r"_\1", text)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())


def _num(v: float) -> str:
    return f"{v:.3g}"


def _title(obj) -> str:
    title = getattr(obj, "title", None)
    return plain(getattr(title, "text", None) if title is not None else None)


def _axis(fig: go.Figure, ref: str | None, letter: str):
    """The layout axis a trace is drawn on ("x2" -> layout.xaxis2)."""
    name = letter + "axis" + (ref or letter)[1:]
    return fig.layout[name] if name in fig.layout else None


def _labels(values, axis) -> list[str]:
    """Axis positions as the text the learner reads: tick labels where the axis sets them."""
    values = list(values) if values is not None else []
    if axis is not None and axis.tickvals is not None and axis.ticktext is not None:
        names = {str(v): plain(t) for v, t in zip(axis.tickvals, axis.ticktext)}
        return [names.get(str(v), plain(v)) for v in values]
    return [plain(v) for v in values]


def _panel_titles(fig: go.Figure) -> dict[str, str]:
    """Subplot titles by the x axis they sit over ("x", "x2", ...), from make_subplots' annotations."""
    grid = getattr(fig, "_grid_ref", None)
    if not grid:
        return {}
    refs = [cell[0].trace_kwargs["xaxis"] for row in grid for cell in row if cell]
    titles = [plain(a.text) for a in fig.layout.annotations if a.xref == "paper" and a.yref == "paper"]
    return dict(zip(refs, titles))


def _heatmap(fig: go.Figure, t, where: str) -> str:
    z = np.array(t.z, dtype=float)  # (rows, columns); None -> nan
    if z.ndim != 2 or not np.isfinite(z).any():
        return f"{where}an empty grid"
    xa, ya = _axis(fig, t.xaxis, "x"), _axis(fig, t.yaxis, "y")
    xs = _labels(t.x if t.x is not None else range(z.shape[1]), xa)
    ys = _labels(t.y if t.y is not None else range(z.shape[0]), ya)
    r, c = np.unravel_index(np.nanargmax(z), z.shape)
    colour = _title(t.colorbar) if t.colorbar is not None else ""
    axes = [s for s in (_title(ya), _title(xa)) if s]
    return (
        f"{where}a grid of {z.shape[0]} rows by {z.shape[1]} columns"
        + (f" ({' by '.join(axes)})" if axes else "")
        + (f", colour = {colour}" if colour else "")
        + f", values {_num(np.nanmin(z))} to {_num(np.nanmax(z))}; the largest, {_num(z[r, c])}, at row "
        f"“{ys[r] if r < len(ys) else r}”, column “{xs[c] if c < len(xs) else c}”"
    )


def _series(fig: go.Figure, t, where: str) -> str:
    y = np.array([np.nan if v is None else v for v in (t.y if t.y is not None else [])], dtype=float)
    name = plain(t.name) or "a series"
    if not np.isfinite(y).any():
        return ""
    if t.type == "bar":
        xs = _labels(t.x if t.x is not None else range(len(y)), _axis(fig, t.xaxis, "x"))
        i = int(np.nanargmax(y))
        return f"{where}{name}: {len(y)} bars, the largest “{xs[i]}” = {_num(y[i])}"
    mode = t.mode or "lines+markers"
    if "lines" in mode and "markers" not in mode:
        x = list(t.x) if t.x is not None else list(range(len(y)))
        ok = [i for i in range(len(y)) if np.isfinite(y[i])]
        if len(ok) < 2:
            return ""
        first, last = ok[0], ok[-1]
        xt = _title(_axis(fig, t.xaxis, "x")) or "x"
        return (
            f"{where}{name}: a line from {_num(y[first])} at {xt} {plain(x[first])} to {_num(y[last])} at "
            f"{xt} {plain(x[last])}, between {_num(np.nanmin(y))} and {_num(np.nanmax(y))}"
        )
    symbol = SYMBOLS.get(str(t.marker.symbol) if t.marker is not None else "", "points")
    return f"{where}{name}: {int(np.isfinite(y).sum())} {symbol}"


def with_words(fig: go.Figure, text: str) -> go.Figure:
    """Give a figure whose encoding the generic reading would miss (tiles, panels) its own words:
    `describe` says them after the title instead of reading the traces."""
    fig.update_layout(meta={"alt": text})
    return fig


def describe(fig: go.Figure, most: int = 6) -> str:
    """The figure in words: its title, then each trace (a grid's size, value range and largest cell;
    a line's ends and range; a bar chart's largest bar; a point cloud's size and markers), at most
    `most` of them and how many more. Every number is read from the figure."""
    title = _title(fig.layout)
    meta = fig.layout.meta
    if isinstance(meta, dict) and meta.get("alt"):
        return f"{title or 'A chart'}. {meta['alt']}"
    panels = _panel_titles(fig)
    said = []
    for t in fig.data:
        if t.visible is False or (t.hoverinfo == "skip" and t.type != "heatmap"):
            continue  # a decoration (a ring, a band, a guide line): its numbers are in the traces it marks
        panel = panels.get(t.xaxis or "x")
        where = f"{panel}: " if panel and len(panels) > 1 else ""
        line = _heatmap(fig, t, where) if t.type == "heatmap" else _series(fig, t, where)
        if line and line not in said:
            said.append(line)
    axes = [s for s in (_title(fig.layout.yaxis), _title(fig.layout.xaxis)) if s]
    grids = any(t.type == "heatmap" for t in fig.data)  # a grid names its own axes
    head = (title or "A chart") + (f" ({' against '.join(axes)})" if axes and not grids else "") + "."
    more = f" And {len(said) - most} more like these." if len(said) > most else ""
    return " ".join([head, *[s[0].upper() + s[1:] + "." for s in said[:most]]]) + more
