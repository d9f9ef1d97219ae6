"""A chart in words, read from the figure's own data: its text alternative (what it shows and its
key numbers) for a learner who cannot see it, or cannot see it well (WCAG 1.1.1, non-text content).

Only public Plotly properties are read (the traces, the layout's axes, annotations and shapes).
A line is a trace drawn with lines (markers or not); a band is a trace filled to the one before it
(`fill="tonexty"`); a point cloud is drawn with markers alone; text alone labels other traces.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

SYMBOLS = {"circle": "circles", "diamond-open": "open diamonds", "circle-open": "rings", "square": "squares"}
MOST = 16  # traces said one by one; a chart with more says how many it left out


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


def _label(v: object) -> str:
    """A position as text: numbers to 3 significant digits (0.30000000000000004 -> 0.3)."""
    if isinstance(v, float | np.floating):
        return _num(float(v))
    return plain(v)


class _Labels(Sequence[str]):
    """Axis positions as the text the learner reads: tick labels where the axis sets them. Each
    label is made when read: a description names a few positions of axes up to 512 long."""

    def __init__(self, values, axis) -> None:
        self.values = list(values) if values is not None else []
        ticks = axis is not None and axis.tickvals is not None and axis.ticktext is not None
        self.names = {str(v): t for v, t in zip(axis.tickvals, axis.ticktext)} if ticks else {}

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i):  # an int (numpy's too), or a slice as a list takes one
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        v = self.values[i]
        return plain(self.names[str(v)]) if str(v) in self.names else _label(v)


def _panel_titles(fig: go.Figure) -> dict[str, str]:
    """Subplot titles by the x axis they sit over ("x", "x2", ...): the paper-positioned
    annotation centred over an axis's domain, just above the top of its y axis's domain."""
    notes = [a for a in fig.layout.annotations if a.xref == "paper" and a.yref == "paper" and a.text]
    titles = {}
    for name in fig.layout.to_plotly_json():
        if not name.startswith("xaxis"):
            continue
        xa = fig.layout[name]
        ya = _axis(fig, xa.anchor if xa.anchor not in (None, "free") else "y" + name[5:], "y")
        if xa.domain is None or ya is None or ya.domain is None:
            continue
        (x0, x1), top = xa.domain, ya.domain[1]
        over = [a for a in notes if a.x is not None and a.y is not None and x0 - 1e-9 <= a.x <= x1 + 1e-9]
        over = [a for a in over if -1e-9 <= a.y - top <= 0.06]
        if over:
            titles["x" + name[5:]] = plain(min(over, key=lambda a: a.y - top).text)
    return titles


def _heatmap(fig: go.Figure, t) -> str:
    z = np.array(t.z, dtype=float)  # (rows, columns); None -> nan
    if z.ndim != 2 or not np.isfinite(z).any():
        return "an empty grid"
    xa, ya = _axis(fig, t.xaxis, "x"), _axis(fig, t.yaxis, "y")
    xs = _Labels(t.x if t.x is not None else range(z.shape[1]), xa)
    ys = _Labels(t.y if t.y is not None else range(z.shape[0]), ya)
    r, c = np.unravel_index(np.nanargmax(z), z.shape)
    colour = _title(t.colorbar) if t.colorbar is not None else ""
    axes = [s for s in (_title(ya), _title(xa)) if s]
    return (
        f"a grid of {z.shape[0]} rows by {z.shape[1]} columns"
        + (f" ({' by '.join(axes)})" if axes else "")
        + (f", colour = {colour}" if colour else "")
        + f", values {_num(np.nanmin(z))} to {_num(np.nanmax(z))}; the largest, {_num(z[r, c])}, at row "
        f"“{ys[r] if r < len(ys) else r}”, column “{xs[c] if c < len(xs) else c}”"
    )


def _values(values) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in (values if values is not None else [])], dtype=float)


def _xy(fig: go.Figure, t) -> tuple[_Labels, np.ndarray, str]:
    """A trace's x positions as the learner reads them, its y values, and the x axis's title."""
    y = _values(t.y)
    x = _Labels(t.x if t.x is not None else range(len(y)), _axis(fig, t.xaxis, "x"))
    return x, y, _title(_axis(fig, t.xaxis, "x")) or "x"


def _side(fig: go.Figure, t) -> str:
    """ " on the right axis (its title)" for a trace drawn against a second y axis."""
    axis = _axis(fig, t.yaxis, "y")
    if t.yaxis in (None, "y") or axis is None or axis.overlaying is None:
        return ""
    return f" on the right axis ({_title(axis)})" if _title(axis) else " on the right axis"


def _line(fig: go.Figure, t, name: str) -> str:
    x, y, xt = _xy(fig, t)
    ok = np.flatnonzero(np.isfinite(y))
    if len(ok) < 2:
        return _points(fig, t, name)
    first, last, lo, hi = ok[0], ok[-1], ok[np.argmin(y[ok])], ok[np.argmax(y[ok])]
    said = (
        f"{name}{_side(fig, t)}: a line of {len(ok)} points from {_num(y[first])} at {xt} {x[first]} to "
        f"{_num(y[last])} at {xt} {x[last]}"
    )
    inner = [
        f"{word} {_num(y[i])} at {xt} {x[i]}" for word, i in (("lowest", lo), ("highest", hi)) if i not in (first, last)
    ]
    said += "; " + ", ".join(inner) if inner else ""
    err = t.error_y
    if err is not None and err.array is not None and err.visible is not False:
        up = _values(err.array)
        down = _values(err.arrayminus) if err.arrayminus is not None else up
        said += f"; error bars, at {xt} {x[last]} from {_num(y[last] - down[last])} to {_num(y[last] + up[last])}"
    return said


def _band(fig: go.Figure, edge, t, name: str) -> str:
    x, y, xt = _xy(fig, t)
    other = _values(edge.y)
    if len(other) != len(y) or not np.isfinite(y).any():
        return ""
    lo, hi = np.minimum(y, other), np.maximum(y, other)  # (points,): the band's two edges
    ok = np.flatnonzero(np.isfinite(lo) & np.isfinite(hi))
    first, last = ok[0], ok[-1]
    wide = ok[np.argmax((hi - lo)[ok])]
    return (
        f"{name}{_side(fig, t)}: a band over {xt} {x[first]} to {x[last]}, from {_num(lo[first])} to "
        f"{_num(hi[first])} at {xt} {x[first]} and from {_num(lo[last])} to {_num(hi[last])} at {xt} {x[last]}; "
        f"widest ({_num(lo[wide])} to {_num(hi[wide])}) at {xt} {x[wide]}"
    )


def _points(fig: go.Figure, t, name: str) -> str:
    y, xv = _values(t.y), _values(t.x) if t.x is not None else None
    ok = np.isfinite(y)
    symbol = SYMBOLS.get(str(t.marker.symbol) if t.marker is not None else "", "points")
    said = f"{name}{_side(fig, t)}: {int(ok.sum())} {symbol}"
    if xv is not None and len(xv) == len(y) and np.isfinite(xv[ok]).all():
        said += f", x from {_num(np.min(xv[ok]))} to {_num(np.max(xv[ok]))}"
    return said + f", y from {_num(np.min(y[ok]))} to {_num(np.max(y[ok]))}"


def _series(fig: go.Figure, t, edge) -> str:
    name = plain(t.name) or "a series"
    y = _values(t.y)
    if not np.isfinite(y).any():
        return ""
    if t.type == "bar":
        x, _, _ = _xy(fig, t)
        i = int(np.nanargmax(y))
        return f"{name}{_side(fig, t)}: {len(y)} bars, the largest “{x[i]}” = {_num(y[i])}"
    if edge is not None:
        return _band(fig, edge, t, name)
    mode = t.mode or "lines"  # a scatter with no mode is drawn with lines
    if "lines" in mode:
        return _line(fig, t, name)
    if "markers" in mode:
        return _points(fig, t, name)
    return ""  # text alone: labels of the other traces


def _levels(fig: go.Figure) -> list[str]:
    """Horizontal level lines (shapes across the plot, as add_hline draws them) with their labels."""
    said = []
    for s in fig.layout.shapes:
        if s.type != "line" or s.y0 is None or s.y0 != s.y1 or not str(s.xref or "").endswith(("domain", "paper")):
            continue
        note = [a for a in fig.layout.annotations if a.y == s.y0 and a.yref == s.yref and a.text]
        label = f" ({plain(note[0].text)})" if note and plain(note[0].text) != _num(s.y0) else ""
        said.append(f"a level line at {_num(s.y0)}{label}")
    return said


def with_words(fig: go.Figure, text: str) -> go.Figure:
    """Give a figure whose encoding the generic reading would miss (tiles, panels) its own words:
    `describe` says them after the title instead of reading the traces."""
    fig.update_layout(meta={"alt": text})
    return fig


def describe(fig: go.Figure, most: int = MOST) -> str:
    """The figure in words: its title, then each trace (a grid's size, value range and largest cell;
    a line's ends, lowest and highest point; a band's edges; a bar chart's largest bar; a point
    cloud's size and extent), panel by panel, at most `most` of them and how many more, then its
    level lines. Every number is read from the figure."""
    title = _title(fig.layout)
    meta = fig.layout.meta
    if isinstance(meta, dict) and meta.get("alt"):
        return f"{title or 'A chart'}. {meta['alt']}"
    panels = _panel_titles(fig)
    data = list(fig.data)
    edges = {i - 1 for i, t in enumerate(data) if i > 0 and getattr(t, "fill", None) == "tonexty"}
    said: dict[str, list[str]] = {}  # panel title ("" for one panel) -> its traces in words
    for i, t in enumerate(data):
        if t.visible is False or i in edges:
            continue
        panel = panels.get(t.xaxis or "x", "") if len(panels) > 1 else ""
        edge = data[i - 1] if i - 1 in edges else None
        line = _heatmap(fig, t) if t.type == "heatmap" else _series(fig, t, edge)
        if line and line not in said.get(panel, []):
            said.setdefault(panel, []).append(line)
    axes = [s for s in (_title(fig.layout.yaxis), _title(fig.layout.xaxis)) if s]
    grids = any(t.type == "heatmap" for t in data)  # a grid names its own axes
    parts = [(title or "A chart") + (f" ({' against '.join(axes)})" if axes and not grids else "") + "."]
    left = most
    for panel, lines in said.items():
        shown, left = lines[:left], left - len(lines[:left])
        if shown:
            text = "; ".join(shown)
            parts.append((f"{panel}: {text}" if panel else text[0].upper() + text[1:]) + ".")
    n = sum(len(lines) for lines in said.values())
    parts += [f"And {n - most} more like these."] if n > most else []
    return " ".join(parts + [s[0].upper() + s[1:] + "." for s in _levels(fig)])
