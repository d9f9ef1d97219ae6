"""What may be shared: the ladder's rungs (mha.analyses.ladder.RungMeasures) and an uptraining's loss."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from mha.plots.common import role_colour

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
