"""What may be shared: the ladder's rungs (mha.analyses.ladder.RungMeasures) and an uptraining's loss."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from mha.plots.common import role_colour
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
    """The ladder's rungs (ladder.RungMeasures) left to right: the sentence cosine of the plain
    mean-pooled conversion and, if given, of the one with its scale restored (left axis; left out
    where not measured), their
    head diversity as bars (right axis), and the baselines (ladder.Baselines) as level lines:
    the cosines' on the left axis, random maps' diversity on the right.
    `cosine` names that cosine (a decoder's: "final-state cosine"), `who` the model it is to."""
    names = [r.rung.name for r in rows]
    fig = go.Figure()
    series = [("mean-pooled", rows, None)] + ([("scale restored", rescaled, "dot")] if rescaled else [])
    drawn = False  # a sentence cosine line (not measured: ladder_measures(whole=False))
    for kind, measured, dash in series:
        cosines = [r.sentence_cosine for r in measured]
        if all(c is None for c in cosines):
            continue
        drawn = True
        line = dict(color=role_colour("sentence cosine"), dash=dash)
        fig.add_scatter(x=names, y=cosines, name=f"{cosine}, {kind}", mode="lines+markers", line=line)
    for (kind, measured, _), opacity in zip(series, (0.35, 0.7)):
        bars = dict(yaxis="y2", marker_color=role_colour("diversity"), opacity=opacity)
        fig.add_bar(x=names, y=[r.diversity for r in measured], name=f"head diversity (JS), {kind}", **bars)
    if baselines is not None:
        for value, label, dash in (
            (baselines.sentence_cosine, "layer's attention removed", "dash"),
            (baselines.sentence_cosine_no_heads, "every head removed", "dashdot"),
        ):
            if value is None:
                continue
            fig.add_trace(
                go.Scatter(
                    x=[names[0], names[-1]],
                    y=[value, value],
                    name=f"{cosine}, {label}",
                    mode="lines",
                    line=dict(color=role_colour("random"), dash=dash),
                )
            )
        fig.add_scatter(  # the diversity's own baseline, on its axis: heads this sharp with nothing in common
            x=[names[0], names[-1]],
            y=[baselines.random_diversity] * 2,
            yaxis="y2",
            name=f"head diversity, random maps as sharp as {who}'s",
            mode="lines",
            line=dict(color=role_colour("diversity"), dash="dot"),
        )
    fig.update_layout(
        title="Down the ladder: what sharing costs, and whether the heads stay different",
        height=400,
        margin=dict(l=10, r=10, t=50, b=10),
        yaxis=dict(title=f"{cosine} to {who}", range=[0, 1.02]) if drawn else dict(visible=False),
        yaxis2=dict(title="head diversity (JS)", overlaying="y", side="right", rangemode="tozero"),
        # level labels, a rung's name on two lines: tilted, "shared Q/K/V" ran into its neighbour at 1280 px
        xaxis=dict(type="category", tickangle=0, tickvals=names, ticktext=[n.replace(" ", "<br>", 1) for n in names]),
        barmode="group",
        legend=dict(orientation="h", y=-0.2),
    )
    return fig


def loss_curve(losses: list[float], title: str) -> go.Figure:
    """A training loss per step (log scale)."""
    fig = go.Figure(go.Scatter(y=losses, mode="lines", name="relative error", line=dict(color=role_colour("loss"))))
    fig.update_layout(
        title=title,
        height=300,
        margin=dict(l=10, r=10, t=50, b=10),
        xaxis=dict(title="step"),
        # whole numbers on every tick (0.5, 0.2): Plotly's default labels a log axis inside a decade "5, 2"
        yaxis=dict(title="relative error", type="log", tickformat=".2~g"),
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
        legend=dict(orientation="h", y=-0.2),
    )
    return fig


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
        f"One row per rung, {len(rungs)} rungs; on each, a marker per variant at its {score_name}, with the 90% "
        f"interval of its change from the model as a bar (in brackets). The model scores {model['score']:.3f} and "
        f"every head removed {removed['score']:.3f} (vertical lines). " + "; ".join(per_rung) + ".",
    )
    fig.update_layout(
        title=title,
        height=140 + 34 * len(rungs),
        margin=dict(l=10, r=10, t=60, b=10),
        xaxis=dict(title=score_name),
        yaxis=dict(type="category", categoryorder="array", categoryarray=rungs[::-1], title=None),
        legend=dict(orientation="h", y=-0.18, yanchor="top"),
    )
    return fig
