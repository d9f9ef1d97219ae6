"""Shared fixtures: one load of the real bundled BERT per test session (no mocks, no network)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers is imported anywhere
os.environ["TRANSFORMERS_OFFLINE"] = "1"
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402

SENTENCES = [
    "The mole on his arm was not a mole but a rare insect.",  # repeated words
    "Unbelievably, the tokenizer splits words like 'antidisestablishmentarianism'!",  # sub-words
    "It is in this spirit that a majority of American governments have passed new laws "
    "since 2009 making the registration or voting process more difficult.",
]


@pytest.fixture(scope="session")
def bert():
    from mha.bert import load_bert

    return load_bert()


def plotly_array(value):
    """A numeric array from figure JSON: Plotly 6+ sends numpy arrays as {dtype, bdata, shape}."""
    import base64

    import numpy as np

    if isinstance(value, dict) and "bdata" in value:
        arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        shape = value.get("shape")
        if shape:
            arr = arr.reshape([int(s) for s in str(shape).split(",")])
        return arr
    return np.asarray(value, dtype=float)
