"""Every page and lesson step on the real Gemma 3 270M (one K/V head, heads of 256 beside a width of
640, sliding windows), on an English, a German and a Chinese sentence: no traceback, no sentence its
traits deny (conftest.false_claims), tokens shown as text."""

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
    for page in PAGES:
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
    overview = said["app_pages/overview.py"]
    assert "all 4 query heads read one $W^K$ and one $W^V$" in overview.replace("All 4", "all 4")
    assert "each head works in $d_k$ = 256 dimensions, set by the model: 4 x 256 = 1024, not 640" in overview
