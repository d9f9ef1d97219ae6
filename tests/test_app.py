"""Every page through Streamlit's AppTest, on the real bundled model."""

from __future__ import annotations

import json

import numpy as np
from streamlit.testing.v1 import AppTest

from conftest import ROOT, plotly_array

TIMEOUT = 120


def new_app() -> AppTest:
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)


def heatmaps(at: AppTest) -> list[dict]:
    figs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    return [t for f in figs for t in f["data"] if t["type"] == "heatmap"]


def test_heatmap_shows_bert_attention_for_the_typed_sentence(bert):
    at = new_app().run()
    assert not at.exception
    text = "The cat sat on the mat because the cat was tired."
    at.sidebar.text_area[0].input(text).run()
    at.selectbox[0].select(3).run()
    at.selectbox[1].select(7).run()
    assert not at.exception
    (hm,) = heatmaps(at)
    run = bert.attend(text)
    z = plotly_array(hm["z"])
    assert z.shape == (len(run.tokens),) * 2  # repeated "the"/"cat" keep their rows
    np.testing.assert_allclose(z, run.attentions[3, 7], atol=1e-6)
