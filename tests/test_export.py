"""Downloads: the CSV and .npz files hold exactly the numbers on screen."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
from conftest import SENTENCES

from mha.analyses import atlas, export


def test_attention_csv_and_npz(bert):
    run = bert.attend(SENTENCES[0])
    T = run.n_tokens
    table = pd.read_csv(io.BytesIO(export.to_csv(run.attentions, run.tokens, [2], [5])), keep_default_na=False)
    assert list(table.columns) == ["layer", "head", "query", "query_token", "key", "key_token", "weight"]
    assert len(table) == T * T and set(table["layer"]) == {2} and set(table["head"]) == {5}
    weights = table.pivot(index="query", columns="key", values="weight").to_numpy()
    np.testing.assert_allclose(weights, run.attentions[2, 5], rtol=1e-5, atol=1e-7)
    assert list(table["query_token"][::T]) == run.tokens and list(table["key_token"][:T]) == run.tokens
    layer = pd.read_csv(io.BytesIO(export.to_csv(run.attentions, run.tokens, [0])))
    assert len(layer) == run.n_heads * T * T
    saved = np.load(io.BytesIO(export.to_npz(run.attentions, run.tokens)))
    np.testing.assert_array_equal(saved["attentions"], run.attentions)
    assert list(saved["tokens"]) == run.tokens


def test_measures_csv(bert):
    m = atlas.measures(bert.attend(SENTENCES[2]))
    table = pd.read_csv(io.BytesIO(atlas.to_csv(m)))
    L, H = m["entropy"].shape
    assert len(table) == L * H and list(table.columns[:3]) == ["layer", "head", "pattern"]
    row = table[(table["layer"] == 1) & (table["head"] == 8)].iloc[0]
    assert row["pattern"] == m["pattern"][1, 8]
    assert row["to next"] == np.float64(float(f"{m['to next'][1, 8]:.6g}"))
