"""Many sessions at once: each sees exactly its own results; the model is loaded once per process."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from streamlit.testing.v1 import AppTest

from conftest import ROOT, plotly_array
from mha import bert as bert_module
from mha import collapse

N_SESSIONS = 8
WORDS = ["river", "violin", "planet", "garden", "engine", "castle", "forest", "rocket"]


def one_session(i: int) -> dict:
    text = f"The {WORDS[i]} near the {WORDS[(i + 3) % 8]} was {i + 2} times older than the {WORDS[i]}."
    layer, shared = i % 6, i % 2 == 1
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params["text"] = text
    at.query_params["layer"] = str(layer)
    at.query_params["head"] = str(i % 12)
    at.run()
    at.switch_page("app_pages/bert_heads.py").run()
    out = {"text": text, "layer": layer, "head": i % 12, "shared": shared, "errors": [e.value for e in at.exception]}
    for c in at.get("plotly_chart"):
        for t in json.loads(c.proto.spec)["data"]:
            if t["type"] == "heatmap" and "query" in t.get("hovertemplate", ""):
                out["head_map"] = plotly_array(t["z"])
    at.switch_page("app_pages/collapse.py").run()
    (toggle,) = [t for t in at.toggle if t.label.startswith("Shared")]
    toggle.set_value(shared).run()
    out["errors"] += [e.value for e in at.exception]
    for c in at.get("plotly_chart"):
        spec = json.loads(c.proto.spec)
        if spec["layout"]["title"]["text"].startswith("Head diversity"):
            out["diversity"] = plotly_array(spec["data"][0]["z"])
    out["sidebar_text"] = at.sidebar.text_area[0].value
    return out


def test_concurrent_sessions_see_only_their_own_results(bert, monkeypatch):
    from mha import ui

    loads = []
    real = bert_module.load_bert
    monkeypatch.setattr(bert_module, "load_bert", lambda name=None: loads.append(name) or real(name))
    ui.load_model.clear()
    with ThreadPoolExecutor(N_SESSIONS) as pool:
        results = list(pool.map(one_session, range(N_SESSIONS)))
    assert loads == ["all-MiniLM-L6-v2"]  # one load for all eight sessions
    for r in results:
        assert r["errors"] == []
        assert r["sidebar_text"] == r["text"]
        run = bert.attend(r["text"])
        np.testing.assert_allclose(r["head_map"], run.attentions[r["layer"], r["head"]], atol=1e-6)
        expect = collapse.collapse_layer(bert, run, r["layer"], 1.0 if r["shared"] else 0.5)
        np.testing.assert_allclose(r["diversity"], expect.diversity, atol=1e-9)
        if r["shared"]:
            assert np.abs(r["diversity"]).max() < 1e-9
        else:
            assert np.abs(r["diversity"]).max() > 1e-3
    assert len({r["text"] for r in results}) == N_SESSIONS
