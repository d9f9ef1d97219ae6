"""The three stages of multi-head attention as a Graphviz (DOT) diagram with real shapes."""

from __future__ import annotations


def stages_dot(
    T: int,
    C: int,
    H: int,
    shared: bool = False,
    groups: int | None = None,
    causal: bool = False,
    d_head: int | None = None,
    window: int | None = None,
    scale: float | None = None,
) -> str:
    """DOT source: X (T x C) -> per-head Q_i, K_i, V_i (T x D) -> attention per head -> concat -> W^O.

    Shows head 0 and an ellipsis for the others (narrow enough for a phone); D = C / H. `shared`
    draws one W^Q, W^K, W^V for all; `groups` (fewer than H) draws K and V shared by groups of heads
    (grouped-query attention; one group: multi-query); `causal` draws a causal mask; `d_head`: the
    model's own head size (None: C / H); `window`: a sliding window of that many keys on some layers.
    """
    if H < 1 or (d_head is None and C % H):
        raise ValueError(f"C={C} must be divisible by H={H}")
    D = C // H if d_head is None else d_head
    mask = (" + causal mask" if causal else "") + (f"\\n(sliding layers: last {window})" if window else "")
    shown = [0]  # one head and an ellipsis: a phone shows 14 pt text at 12 px or more
    lines = [
        "digraph MHA {",
        # top to bottom, one head beside an ellipsis: drawn at its own size (ui.diagram), never scaled below 12 px
        "  rankdir=TB; nodesep=0.25; ranksep=0.3;",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=14];',
        '  graph [fontname="Helvetica", fontsize=14];',
        '  edge [color="#555555"];',
        f'  X [label="X\\ntoken vectors\\n{T} x {C}", fillcolor="#e8e8e8"];',
        '  subgraph cluster_1 { label="1. project (per head)"; color="#88CCEE";',
    ]
    for i in shown:
        grouped = groups is not None and groups < H
        w = (
            "W^Q, W^K, W^V (shared)"
            if shared
            else f"W_{i}^Q; W^K, W^V\\n(one for all {H} heads)"
            if grouped and groups == 1
            else f"W_{i}^Q; W^K, W^V of group {i // (H // groups)}\\n(one per {H // groups} heads)"
            if grouped
            else f"W_{i}^Q, W_{i}^K, W_{i}^V"
        )
        lines.append(
            f'    P{i} [label="{w}\\n{C} x {D} each\\n-> Q_{i}, K_{i}, V_{i}\\n{T} x {D} each", fillcolor="#d6eef8"];'
        )
    if H > 1:
        lines.append(f'    Pdots [label="... {H - 1}\\nmore\\nheads", shape=plaintext, style=""];')
    lines += ["  }", '  subgraph cluster_2 { label="2. attend (all heads in parallel)"; color="#DDCC77";']
    for i in shown:
        lines.append(
            f'    A{i} [label="head {i}\\nsoftmax(Q_{i} K_{i}^T\\n{_scaled(D, scale)}{mask}) times V_{i}'
            f'\\nweights {T} x {T}\\n-> out {T} x {D}", fillcolor="#f6f0d6"];'
        )
    if H > 1:
        lines.append('    Adots [label="...", shape=plaintext, style=""];')
    lines += [
        "  }",
        '  subgraph cluster_3 { label="3. concatenate, then mix"; color="#CC6677";',
        f'    Cat [label="Concat(head_0..head_{H - 1})\\n{T} x ({H} x {D}) = {T} x {H * D}", fillcolor="#f3dde1"];',
        f'    WO [label="x W^O\\n{H * D} x {C}", fillcolor="#f3dde1"];',
        "  }",
        f'  Y [label="output\\n{T} x {C}", fillcolor="#e8e8e8"];',
    ]
    for i in shown:
        lines += [f"  X -> P{i};", f"  P{i} -> A{i};", f"  A{i} -> Cat;"]
    if H > 1:
        lines += ["  X -> Pdots;", "  Pdots -> Adots;", "  Adots -> Cat;"]
    lines += ["  Cat -> WO;", "  WO -> Y;", "}"]
    return "\n".join(lines)


def _scaled(D: int, scale: float | None) -> str:
    """What the scores are scaled by, in the diagram's plain text: / sqrt(D), or the model's own factor."""
    return f"/ sqrt({D})" if scale is None or abs(scale * D**0.5 - 1) < 1e-6 else f"x {scale:.4g}"


def stages_text(
    T: int,
    C: int,
    H: int,
    groups: int | None = None,
    causal: bool = False,
    d_head: int | None = None,
    window: int | None = None,
    scale: float | None = None,
) -> str:
    """The diagram in words (its text alternative), with the same shapes (arguments as stages_dot)."""
    D = C // H if d_head is None else d_head
    grouped = groups is not None and groups < H
    own = (
        f"own W_i^Q and the one W^K and W^V all {H} heads read ({C} x {D} each)"
        if grouped and groups == 1
        else f"own W_i^Q and its group's W^K and W^V (one of {groups}, each shared by {H // groups} heads; "
        f"{C} x {D} each)"
        if grouped
        else f"own W_i^Q, W_i^K and W_i^V ({C} x {D} each)"
    )
    mask = " with a causal mask (a token reads only itself and the tokens before it" if causal else ""
    if causal:
        mask += f"; on a sliding-window layer, only the last {window} of them)" if window else ")"
    k, v = ("K", "V") if grouped and groups == 1 else ("K_g(i)", "V_g(i)") if grouped else ("K_i", "V_i")
    got = f"Q_i, {k} and {v}" + (" (the K and V every head reads)" if grouped and groups == 1 else "")
    return (
        f"X, the token vectors ({T} x {C}), goes to each of the {H} heads. 1. Project: head i multiplies X by its "
        f"{own} to get {got} ({T} x {D} each). 2. Attend: every "
        f"head computes softmax(Q_i {k}^T {_scaled(D, scale)}){mask}, a {T} x {T} grid of weights, times {v}: an "
        f"output of {T} x {D}. 3. Concatenate the {H} outputs side by side ({T} x ({H} x {D}) = {T} x {H * D}) and "
        f"multiply by W^O ({H * D} x {C}): the output, {T} x {C}."
    )
