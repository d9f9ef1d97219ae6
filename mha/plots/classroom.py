"""The teacher's projector: the class's first answers to one question as bars, large and black."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from mha.plots.common import INK, PALETTE, wrap

BIG = 24  # px: read from the back of a classroom
HEIGHT = 330  # px: with the code, the moves, the step and the sentence, on one 1280 x 720 screen
LABEL = 18  # characters of a bar's label per line (a long option wraps instead of being cut)


def answers_histogram(
    labels: Sequence[str], counts: Sequence[int], right: Sequence[bool], reveal: bool, title: str
) -> go.Figure:
    """One bar per option: how many students gave it as their first answer. With `reveal`, the
    right option's bar is drawn in another colour and its label says "(right)" (not by colour
    alone); before that every bar looks the same, so the class discusses before it knows."""
    names = [f"{label} (right)" if reveal and ok else label for label, ok in zip(labels, right)]
    ticks = [wrap(name, LABEL) for name in names]
    colours = [PALETTE[1] if reveal and ok else PALETTE[0] for ok in right]
    fig = go.Figure(
        go.Bar(
            x=list(range(len(labels))),
            y=list(counts),
            marker_color=colours,
            text=[str(c) for c in counts],
            textposition="outside",
            textfont=dict(size=BIG, color=INK),
            cliponaxis=False,
            hovertemplate="%{customdata}: %{y} students<extra></extra>",
            customdata=names,
        )
    )
    top = max([*counts, 1])
    fig.update_layout(
        title=dict(text=wrap(title, 70), font=dict(size=BIG - 2, color=INK)),
        xaxis=dict(
            tickmode="array", tickvals=list(range(len(labels))), ticktext=ticks, tickfont=dict(size=BIG - 4, color=INK)
        ),
        yaxis=dict(
            title=dict(text="students (first answers)", font=dict(size=BIG - 4, color=INK)),
            tickfont=dict(size=BIG - 4, color=INK),
            range=[0, top * 1.25],
            dtick=max(1, round(top / 5)),
        ),
        height=HEIGHT,
        margin=dict(t=70, b=20, l=80, r=20),
        showlegend=False,
    )
    return fig
