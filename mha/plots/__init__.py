"""Plotly figures, one module per page family; every function takes arrays or the engine's
dataclasses and returns a go.Figure (no Streamlit here).

- common: token axes (repeated tokens keep their own row), palette and named colour roles, tiles, panel grids
- heads: one head's map, the model view, head grids, the line view, token focus (BERT's heads, atlas)
- build: a matrix of the from-scratch trace
- collapse: head-by-head matrices and the measures along alpha
- subspaces: queries and keys in 2-D, their animation, pooled sentences, spectra
- atlas: a measure per head, per-token rows (rollout, value-weighted)
- training: live training curves, trained models' maps (why many heads)
- ladder: the GQA/MQA ladder and an uptraining's loss
- pruning: pruning curves of the heads study
- lesson: the lesson's own figures
- classroom: the teacher's histogram of a class's first answers
- describe: any of these figures in words, read from its data (the text alternative)
"""

from mha.plots import (
    atlas,
    build,
    classroom,
    collapse,
    common,
    describe,
    heads,
    ladder,
    lesson,
    pruning,
    subspaces,
    training,
)

__all__ = [
    "atlas",
    "build",
    "classroom",
    "collapse",
    "common",
    "describe",
    "heads",
    "ladder",
    "lesson",
    "pruning",
    "subspaces",
    "training",
]
