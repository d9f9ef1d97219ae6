"""What may be shared: the ladder's rungs (mha.analyses.ladder.RungMeasures) and an uptraining's loss."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from mha.plots.common import legend_below, role_colour
from mha.plots.describe import with_words

if TYPE_CHECKING:
    from mha.analyses.ladder import Baselines, RungMeasures


def ladder_chart(
    rows: list[RungMeasures],
    rescaled: list[RungMeasures] | None = None,
    baselines: Baselines | None = None,
    cosine: str = "sentence cosine",
    who: str = "BERT",
) -> go.Figure:
    """Inside one layer, rung by rung (ladder.RungMeasures, a row each): the heads' diversity as bars,
    plainly mean-pooled and (if given) rescaled, each beside random maps exactly as sharp as that rung's
    own (markers), and random maps as sharp as the model's (ladder.Baselines) as a vertical line. The
    cosines, which the residual stream keeps near 1 (recap.residual), are in the tables, not here: on a
    0-1 axis they sat in a 6 px band. Horizontal, so that every rung's name reads on a phone."""
    names = [r.rung.name for r in rows]
    fig = go.Figure()
    series = [("mean-pooled", rows, 0.45)] + ([("scale restored", rescaled, 0.9)] if rescaled else [])
    for kind, measured, opacity in series:
        fig.add_bar(
            y=names,
            x=[r.diversity for r in measured],
            orientation="h",
            name=f"head diversity (JS), {kind}",
            marker_color=role_colour("diversity"),
            opacity=opacity,
        )
    for (kind, measured, _), symbol in zip(series, ("x", "x-open")):
        fig.add_scatter(
            y=names,
            x=[r.random_diversity for r in measured],
            mode="markers",
            name=f"random maps, {kind}",  # as sharp as the rung's own (the words say it)
            marker=dict(color=role_colour("random"), symbol=symbol, size=9),
        )
    words = "; ".join(
        f"{kind}: " + ", ".join(f"{r.rung.name} {r.diversity:.3g} (random {r.random_diversity:.3g})" for r in measured)
        for kind, measured, _ in series
    )
    if baselines is not None:
        fig.add_vline(x=baselines.random_diversity, line=dict(color=role_colour("random"), dash="dot"))
        fig.add_scatter(  # the line's legend entry
            x=[None],
            y=[None],
            mode="lines",
            name=f"random maps as sharp as {who}'s: {baselines.random_diversity:.3f}",
            line=dict(color=role_colour("random"), dash="dot"),
        )
    with_words(
        fig,
        f"One row per rung, {len(names)} rung{'s' * (len(names) != 1)}: the heads' diversity (mean Jensen-Shannon "
        f"divergence between "
        f"heads, nats) as a bar, and random maps exactly as sharp as that rung's as a marker (in brackets). "
        + words
        + (
            f". Random maps as sharp as {who}'s: {baselines.random_diversity:.3g} (a vertical line)."
            if baselines
            else "."
        ),
    )
    fig.update_layout(
        title="Inside one layer: how far apart the heads are, rung by rung",
        height=260 + 44 * len(names),
        margin=dict(l=10, r=10, t=60, b=10),
        barmode="group",
        xaxis=dict(title="head diversity (JS, nats)", rangemode="tozero"),
        yaxis=dict(type="category", categoryorder="array", categoryarray=names[::-1], tickvals=names, title=None),
    )
    return legend_below(fig)


def log_ticks(values: list[float]) -> list[float]:
    """Tick values for a log axis over `values`: the powers of ten inside their range when there are at
    least two, else 1, 2 and 5 times each power of ten inside it."""
    positive = [v for v in values if v > 0]
    if not positive:
        return [1.0]
    lo, hi = min(positive), max(positive)
    powers = range(int(np.floor(np.log10(lo))), int(np.ceil(np.log10(hi))) + 1)
    decades = [10.0**k for k in powers if lo <= 10.0**k <= hi]
    if len(decades) >= 2:
        return decades
    return [m * 10.0**k for k in powers for m in (1, 2, 5) if lo <= m * 10.0**k <= hi] or [lo, hi]


def loss_curve(losses: list[float], title: str) -> go.Figure:
    """A training loss per step (log scale)."""
    fig = go.Figure(go.Scatter(y=losses, mode="lines", name="relative error", line=dict(color=role_colour("loss"))))
    fig.update_layout(
        title=title,
        height=300,
        margin=dict(l=10, r=10, t=50, b=10),
        xaxis=dict(title="step"),
        # ticks written as numbers (0.5, 0.2, never Plotly's bare "5, 2" inside a decade), and only as many as fit
        # a phone's chart: the decades when two fall in the range, else 1, 2 and 5 of each decade
        yaxis=dict(title="relative error", type="log", tickformat=".2~g", tickvals=log_ticks(losses)),
    )
    return fig


def group_chart(within: np.ndarray, across: np.ndarray, rank: np.ndarray, texts: int) -> go.Figure:
    """Per layer (L,): the mean head diversity (JS, nats) between query heads of one K/V group and
    of two groups (lines), over `texts` texts, and the rank of the model's grouping among every
    equal-size partition of the heads (bars, right axis)."""
    layers = list(range(len(within)))
    fig = go.Figure()
    fig.add_scatter(
        x=layers, y=within, name="same K/V group", mode="lines+markers", line=dict(color=role_colour("mqa"))
    )
    fig.add_scatter(
        x=layers, y=across, name="different groups", mode="lines+markers", line=dict(color=role_colour("shared"))
    )
    fig.add_bar(
        x=layers, y=rank, name="rank among partitions", yaxis="y2", marker_color=role_colour("random"), opacity=0.35
    )
    fig.update_layout(
        title=f"Do heads that share K and V attend alike? Mean over {texts} sentences",
        height=380,
        margin=dict(l=10, r=10, t=50, b=10),
        xaxis=dict(title="layer"),
        yaxis=dict(title="head diversity (JS, nats)", rangemode="tozero"),
        yaxis2=dict(title="rank among partitions", overlaying="y", side="right", range=[0, 1]),
    )
    return legend_below(fig)


VERDICT_SERIES = (  # (kind, pooling, legend name, colour, marker) of verdict_chart, drawn in this order
    ("converted", "mean-pooled", "converted, mean-pooled", "#332288", "circle"),
    ("converted", "scale restored", "converted, scale restored", "#88CCEE", "diamond"),
    ("uptrained", "mean-pooled", "uptrained (from the mean)", "#117733", "star"),
    ("floor", "mean-pooled", "random projections (mean-pooled norms)", "#888888", "x"),
)


def verdict_chart(rows: list[dict], score_name: str, title: str) -> go.Figure:
    """The verdict (mha.lesson.verdict.interval_rows): one row per rung, each kind of variant a marker
    at its score with the 90 % paired interval of its change from the model as an error bar; the model
    and every head removed as vertical lines."""
    model = next(r for r in rows if r["kind"] == "model")
    removed = next(r for r in rows if r["kind"] == "removed")
    rungs = list(dict.fromkeys(r["rung"] for r in rows if r["kind"] == "converted"))
    fig = go.Figure()
    for kind, pooling, name, colour, symbol in VERDICT_SERIES:
        found = {r["rung"]: r for r in rows if r["kind"] == kind and r["pooling"] == pooling}
        if not found:
            continue
        shown = [found[n] for n in rungs if n in found]
        fig.add_scatter(
            x=[r["score"] for r in shown],
            y=[r["rung"] for r in shown],
            mode="markers",
            name=name,
            marker=dict(color=colour, symbol=symbol, size=11),
            error_x=dict(
                type="data",
                symmetric=False,
                array=[r["high"] - r["change from the model"] for r in shown],
                arrayminus=[r["change from the model"] - r["low"] for r in shown],
                color=colour,
                thickness=1.5,
            ),
            hovertemplate="%{y}: %{x:.3f}<extra>" + name + "</extra>",
        )
    for r, dash, words in ((model, "solid", "the model"), (removed, "dash", "every head removed")):
        fig.add_vline(x=r["score"], line=dict(color="#1a1a1a" if r is model else "#AA4499", dash=dash, width=1.5))
        fig.add_scatter(  # a legend entry for the line
            x=[None],
            y=[None],
            mode="lines",
            name=f"{words}: {r['score']:.3f}",
            line=dict(color="#1a1a1a" if r is model else "#AA4499", dash=dash),
        )
    said = {(r["rung"], r["kind"], r["pooling"]): r for r in rows}
    per_rung = [
        f"{n}: "
        + ", ".join(
            f"{name} {said[(n, kind, pooling)]['score']:.3f} ({said[(n, kind, pooling)]['low']:+.3f} to "
            f"{said[(n, kind, pooling)]['high']:+.3f})"
            for kind, pooling, name, _, _ in VERDICT_SERIES
            if (n, kind, pooling) in said
        )
        for n in rungs
    ]
    with_words(
        fig,
        f"One row per rung, {len(rungs)} rung{'s' * (len(rungs) != 1)}; on each, a marker per variant at its "
        f"{score_name}, with the 90% "
        f"interval of its change from the model as a bar (in brackets). The model scores {model['score']:.3f} and "
        f"every head removed {removed['score']:.3f} (vertical lines). " + "; ".join(per_rung) + ".",
    )
    fig.update_layout(
        title=title,
        height=260 + 36 * len(rungs),  # a row a rung, and room for the legend's six lines on a phone
        margin=dict(l=10, r=10, t=60, b=10),
        xaxis=dict(title=score_name),
        yaxis=dict(type="category", categoryorder="array", categoryarray=rungs[::-1], tickvals=rungs, title=None),
    )
    return legend_below(fig)
