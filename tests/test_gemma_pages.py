"""Every page and lesson step on the real Gemma 3 270M (one K/V head, heads of 256 beside a width of
640, sliding windows) on an English sentence, and the pages that show tokens on a German and a
Chinese one: no traceback, no sentence its traits deny (conftest.false_claims), tokens shown as text."""

from __future__ import annotations

import pytest
from conftest import false_claims, traits_page_text
from streamlit.testing.v1 import AppTest

from livetest import ROOT
from mha.lesson import steps
from mha.models import fetch_gemma
from mha.models.catalog import GEMMA_MODEL
from ui.pages import PAGES

TEXTS = {
    "English": "The lawyer told the judge that she would appeal the ruling.",
    "German": "Die Bäckerei an der Ecke verkauft jeden Morgen frisches Brot.",
    "Chinese": "虽然外面在下雨，我们还是去了公园散步。",
}


TOKEN_PAGES = {"bert_heads.py", "build.py", "atlas.py", "lesson.py"}


@pytest.mark.parametrize("language", list(TEXTS))
def test_every_page_and_step_on_gemma(language):
    if not fetch_gemma.is_converted():
        pytest.fail(f"Gemma 3 is not in {fetch_gemma.converted_dir()}: run python -m mha.models.fetch first (README)")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.query_params["model"] = GEMMA_MODEL
    at.query_params["text"] = TEXTS[language]
    at.run()
    assert at.session_state["model"] == GEMMA_MODEL, [e.value for e in at.error]
    said = {}
    # English: every page and step. German and Chinese: the pages that show the tokens themselves
    # (every page draws them with the same code; the words around them are the English walk's)
    walked = PAGES if language == "English" else [p for p in PAGES if p.file in TOKEN_PAGES]
    for page in walked:
        at.switch_page(page.path).run()
        assert not at.exception, (page.path, [e.value for e in at.exception])
        if page.file == "lesson.py" and language == "English":  # every step once: the words are the structure's
            for n in range(1, len(steps.STEPS) + 1):
                at.session_state["step"] = n
                at.run()
                for radio in [r for r in at.radio if str(r.key).startswith("_w_q_")]:
                    radio.set_value(0).run()
                assert not at.exception, (n, [e.value for e in at.exception])
                said[f"lesson step {n}"] = traits_page_text(at)
        said[page.path] = traits_page_text(at)
    from ui.cache import load_model

    traits = load_model(GEMMA_MODEL).traits
    for where, text in said.items():
        if where != "app_pages/why_heads.py":  # that page speaks of its own tiny models, not of the one picked
            assert not false_claims(text, traits), (where, false_claims(text, traits))
        assert "�" not in text, where
    if language != "English":
        assert len(said) == len(TOKEN_PAGES)
        return
    collapse = said["app_pages/collapse.py"]  # one K/V head: no head has a W^K of its own below alpha = 1
    assert "Below alpha = 1 every head still has its own $W^Q$ (pulled towards the shared one)" in collapse
    assert "$W^K$, $W^V$ are one matrix each for all 4 heads already" in collapse
    assert "Scores $Q_i K^\\top" in said["app_pages/build.py"]
    overview = said["app_pages/overview.py"]
    assert "all 4 query heads read one $W^K$ and one $W^V$" in overview.replace("All 4", "all 4")
    assert "each head works in $d_k$ = 256 dimensions, set by the model: 4 x 256 = 1024, not 640" in overview


def _figure(at, title: str) -> dict:
    """The figure JSON of the chart titled `title` (Plotly's title text)."""
    import json

    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        if ((spec["layout"].get("title") or {}).get("text") or "").replace("<br>", " ") == title:  # wrapped
            return spec
    raise AssertionError(f"no chart titled {title!r} in {titles(at)}")


def titles(at) -> list[str]:
    import json

    return [(json.loads(c.proto.spec)["layout"].get("title") or {}).get("text") for c in at.get("plotly_chart")]


def test_a_window_the_learner_can_see():
    """Past 512 tokens the head map of a sliding layer draws the window's edge where Transformers' own
    weights become 0 (a full layer has none); the build page runs a window of 8 on the sentence,
    marked as a change, and its share of hidden weight is recomputed here from Transformers' weights."""
    import re

    import numpy as np
    import torch
    from conftest import plotly_array

    from ui.cache import load_model

    model = load_model(GEMMA_MODEL)
    text = " ".join([TEXTS["English"]] * 45)  # about 600 tokens: past the 512-key window, under MAX_TOKENS
    ids = model.tokenizer(text, return_tensors="pt")["input_ids"]
    T = ids.shape[1]
    assert 512 < T <= 768
    with torch.inference_mode():
        theirs = model.model(ids, output_attentions=True).attentions  # Transformers' eager weights, per layer
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=600)
    at.query_params["model"] = GEMMA_MODEL
    at.query_params["text"] = text
    at.run()
    at.switch_page("app_pages/bert_heads.py").run()
    assert not at.exception, [e.value for e in at.exception]
    shapes = _figure(at, "Layer 0, head 0")["layout"].get("shapes", [])
    assert len(shapes) == 1 and shapes[0]["line"]["dash"] == "dash"
    points = [tuple(map(float, p.split(","))) for p in re.findall(r"-?[\d.]+,-?[\d.]+", shapes[0]["path"])]
    w = theirs[0][0, 0].double().numpy()  # (T, T) layer 0 (sliding), head 0
    for x, y in points[1::2]:  # the bottom of each row's step: row y - 0.5, its edge at x
        row, first = round(y - 0.5), round(x + 0.5)  # the first key the row reads
        assert w[row, :first].max() == 0 and w[row, first] > 0, (row, first)
    assert {round(y - 0.5) for _, y in points[1::2]} == set(range(512, T))  # every row past the window, no other
    caption = " ".join(c.value for c in at.caption)
    assert (
        "Layer 0 is a sliding-window layer: each token reads only itself and at most the 511 tokens before it"
        in caption
    )
    assert "its K/V cache needs at most 512 tokens' keys and values" in caption.replace("this layer's", "its")
    at.session_state["layer"] = 5  # a full layer: no edge, and the last row still reads key 0
    at.run()
    assert not _figure(at, "Layer 5, head 0")["layout"].get("shapes")
    assert theirs[5][0, 0, -1, 0] > 0

    at.session_state["build_window"] = 8
    at.session_state["layer"] = 0
    at.switch_page("app_pages/build.py").run()
    assert not at.exception, [e.value for e in at.exception]
    [changed] = [w.value for w in at.warning if "**Changed**" in w.value]
    assert "a sliding window of 8 keys in place of its own 512" in changed and "Parity check" not in " ".join(
        s.value for s in at.success
    )
    a = theirs[0][0].double().numpy()  # (H, T, T)
    hidden = np.mean([[a[h, i, : i - 7].sum() for i in range(8, T)] for h in range(a.shape[0])])
    said = float(re.search(r"put ([\d.]+)% of their weight on keys this window hides", changed).group(1)) / 100
    assert said == pytest.approx(hidden, abs=0.006)
    per_token = 2 * 1 * 256 * 2  # K and V, one K/V head of 256, fp16 bytes
    kib = f"{per_token * 8 / 1024:g} KiB in fp16 instead of {per_token * 512 / 1024:g} KiB for 512 tokens"
    assert f"at most 8 tokens, {kib}" in changed
    step2 = _figure(at, "Head 0: softmax(QK<sup>T</sup> / √d<sub>k</sub>)")
    z = plotly_array(step2["data"][0]["z"])  # the first 64 tokens, window 8: a band of 8 keys
    assert len(step2["layout"]["shapes"]) == 1
    assert all(z[i, : i - 7].max() == 0 and z[i, i - 7] > 0 for i in range(8, z.shape[0]))


def test_one_decoder_is_resident_at_a_time():
    """Asking the shared cache for the other decoder drops the first with its results: once nothing
    else holds it, it is collected (a weak reference dies), and the encoder stays cached, with its
    results, beside the one decoder."""
    import gc
    import weakref

    from mha.models.catalog import DECODER_MODEL, DEFAULT_MODEL
    from ui import cache
    from ui.state import Inputs

    bert = cache.load_model(DEFAULT_MODEL)
    smol = weakref.ref(cache.load_model(DECODER_MODEL))
    on = {
        name: Inputs.from_raw(name, "the results of a decoder leave with it") for name in (DEFAULT_MODEL, DECODER_MODEL)
    }
    for name in on:
        cache.cached_run(on[name]), cache.cached_spectra(name, 0)
    gemma = cache.load_model(GEMMA_MODEL)
    gc.collect()
    assert smol() is None, gc.get_referrers(smol())
    assert cache.load_model(GEMMA_MODEL) is gemma and cache.load_model(DEFAULT_MODEL) is bert
    # SmolLM2's runs and per-model results went with it; the encoder's stay
    assert not cache.cached_run.ready(on[DECODER_MODEL]) and not cache.cached_spectra.ready(DECODER_MODEL, 0)
    assert cache.cached_run.ready(on[DEFAULT_MODEL]) and cache.cached_spectra.ready(DEFAULT_MODEL, 0)
