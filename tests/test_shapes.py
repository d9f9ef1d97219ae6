"""Every page adapts to the model's shape: a randomly initialised BERT of bert-base's shape
(12 layers, 12 heads, 768 wide) and an odd one (3 layers, 4 heads, 128 wide), each saved with the
bundled tokenizer in a local directory at test time and opened as the "local" model."""

from __future__ import annotations

import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from livetest import ROOT
from mha.core.attention import valid_head_counts
from mha.models.bert import save_random_bert
from ui import cache
from ui.pages import PAGES

SHAPES = {"bert-base": (12, 12, 768), "odd": (3, 4, 128)}


@pytest.fixture(scope="module", params=list(SHAPES))
def local_model(request, tmp_path_factory):
    L, H, C = SHAPES[request.param]
    path = save_random_bert(tmp_path_factory.mktemp(request.param), L, H, C)
    mp = pytest.MonkeyPatch()
    mp.setenv("MHA_MODEL_DIR", path)
    cache.clear()  # results kept for "local" belong to the previous directory
    yield request.param, (L, H, C)
    mp.undo()
    cache.clear()


BUNDLED_FIGURES = re.compile(
    r"Measured on the bundled model|0\.84 -> 0\.95|fits almost exactly \(0\.99\)|15-25 s|lock onto one relation"
)
TWELVE = re.compile(
    r"(?i)twelve|\b12 (copies|different|value)|the 12 heads of layer|12 heads in layer|across the 12 heads"
)


def page_texts(at: AppTest) -> str:
    """Every sentence, metric and chart title on the page."""
    texts = [m.label + " " + str(m.value) for m in at.metric]
    for kind in ("markdown", "caption", "info", "success", "warning", "error", "subheader"):
        texts += [str(e.value) for e in at.get(kind)]
    for chart in at.get("plotly_chart"):
        texts.append(str(json.loads(chart.proto.spec).get("layout", {}).get("title", {}).get("text", "")))
    return "\n".join(texts)


def test_every_page_adapts_to_the_shape(local_model):
    """Every page runs on the shape, and every count, layer and figure comes from the model on
    screen: no page quotes the bundled model's figures, and on the 4-head model none says 12 heads
    (also after the actions that bring out the conclusions: the heads study, an uptraining, the
    shared layer, lesson step 6)."""
    name, (L, H, C) = local_model
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.query_params["model"] = "local"
    at.query_params["layer"] = str(L - 1)
    at.run()
    seen = {}
    for page in PAGES:
        at.switch_page(page.path).run()
        if page.file == "heads_needed.py":
            assert at.button(key="needed_measure")  # a large model is measured only when asked
            if name == "odd":
                at.button(key="needed_measure").click().run()
        if name == "odd" and page.file == "sharing.py":
            at.select_slider(key="_w_sharing_steps").set_value(250).run()
            tied = [r for r in at.selectbox(key="_w_sharing_rung").options if r.startswith("shared Q, K")][0]
            at.selectbox(key="_w_sharing_rung").select(tied).run()
            at.button(key="sharing_train").click().run()
        if name == "odd" and page.file == "collapse.py":
            at.toggle(key="_w_collapse_shared").set_value(True).run()
        if name == "odd" and page.file == "lesson.py":
            at.session_state["step"] = 6
            at.run()
            [r for r in at.radio if "predict" in str(r.key)][0].set_value(1).run()
            at.toggle(key="_w_lesson_share").set_value(True).run()
        assert not at.exception, (name, page.file, [e.value for e in at.exception])
        seen[page.file] = text = page_texts(at)
        assert not BUNDLED_FIGURES.findall(text), (name, page.file, BUNDLED_FIGURES.findall(text))
        # the bundled model's task is not this model's own
        assert "its own task" not in text and "the task all-MiniLM-L6-v2 was trained for:" not in text, page.file
        if name == "odd":
            assert not TWELVE.findall(text), (page.file, TWELVE.findall(text))
        assert at.session_state["model"] == "local", page.file
        if page.file == "bert_heads.py":
            view = [json.loads(c.proto.spec) for c in at.get("plotly_chart")][0]
            assert len(view["layout"]["yaxis"]["ticktext"]) == L and len(view["layout"]["xaxis"]["ticktext"]) == H
            assert at.selectbox(key="_w_layer").options == [f"layer {i}" for i in range(L)]
            assert at.selectbox(key="_w_head").options == [f"head {i}" for i in range(H)]
        if page.file == "build.py":
            heads = [int(o) for o in at.selectbox(key="_w_build_heads").options]
            assert heads == [h for h in valid_head_counts(C) if h <= 48]
            assert at.selectbox(key="_w_build_heads").value == H
        if page.file == "subspaces.py":
            panels = json.loads(at.get("plotly_chart")[0].proto.spec)
            assert len([t for t in panels["data"] if t.get("name") == "queries"]) == H
    if name == "odd":
        assert f"one head computed {H} times" in seen["collapse.py"]
        assert f"Q and K stayed one matrix each for all {H} heads" in seen["sharing.py"]
        assert "heads** can go" in seen["heads_needed.py"] and f"of {L * H} heads" in seen["heads_needed.py"]
        assert f"{H} copies of one head" in seen["lesson.py"]
