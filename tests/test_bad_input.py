"""Bad input at every entry point, on every page: a clear message or a sensible default, never a
traceback; tokens that look like markup are shown literally."""

from __future__ import annotations

import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from livetest import ROOT
from ui.pages import PAGES as SPECS

PAGES = [p.path for p in SPECS]
MODEL_PAGES = [p for p in PAGES if not p.endswith(("why_heads.py", "glossary.py"))]  # pages that read the sentence
TEXTS = {
    "empty": "",
    "whitespace": "   \n\t  ",
    "one character": "a",
    "10,000 characters": ("attention " * 1000)[:10_000],
    "emoji": "🙂🙃 attention 👀!",
    "CJK": "注意力机制很重要。",
    "right-to-left": "הקשב הוא כל מה שצריך",
    "combining": "e\u0301 a\u0308 n\u0303 cafe\u0301",
    "control and NUL": "a\x00b\x07c\x1b[31mred",
    "only NUL": "\x00\x00\x00",
    "img onerror": "<img src=x onerror=alert(1)>",
    "script": "<script>alert(1)</script>",
    "markdown": "**x** _y_ `z` [link](http://example.com)",
    "latex": "$x$ and $$\\int x$$",
}
NOTHING = ("empty", "whitespace", "only NUL")


def open_app(**params) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    for k, v in params.items():
        at.query_params[k] = v
    return at.run()


def text_of(at: AppTest) -> str:
    parts = [
        e.value
        for kind in ("markdown", "caption", "info", "warning", "error", "success", "title", "subheader", "header")
        for e in at.get(kind)
        if hasattr(e, "value")
    ]
    return "\n".join(str(p) for p in parts)


@pytest.mark.parametrize("name", list(TEXTS))
def test_bad_text_on_every_page(name):
    text = TEXTS[name]
    at = open_app(text=text)
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, (name, page, [e.value for e in at.exception])
        shown = text_of(at)
        if name in NOTHING and page in MODEL_PAGES:
            assert "empty" in shown or "Nothing is left" in shown, (name, page)
        if name == "10,000 characters" and page == "app_pages/bert_heads.py":
            assert "tokens were dropped" in shown
        for chart in at.get("plotly_chart"):
            spec = chart.proto.spec
            assert "<img" not in spec and "<script" not in spec, (name, page)
        if name in ("img onerror", "script") and page == "app_pages/bert_heads.py":
            # the "<" token is in the charts as literal text (escaped for Plotly), not as markup
            ticks = [
                json.loads(c.proto.spec)["layout"].get("yaxis", {}).get("ticktext", []) for c in at.get("plotly_chart")
            ]
            assert any("&lt;" in t for tt in ticks for t in tt)


@pytest.mark.parametrize("name", ["markdown", "img onerror", "control and NUL"])
def test_bad_second_sentence(name):
    at = open_app()
    at.text_input(key="_w_text_b").input(TEXTS[name]).run()
    for page in MODEL_PAGES:
        at.switch_page(page).run()
        assert not at.exception, (name, page)


@pytest.mark.parametrize(
    "params,expect",
    [
        ({"layer": "99"}, "does not exist"),
        ({"layer": "-1"}, "does not exist"),
        ({"head": "12"}, "does not exist"),
        ({"layer": "abc"}, "not a whole number"),
        ({"layer": "1.5"}, "not a whole number"),
        ({"head": ""}, "not a whole number"),
        ({"layer": "9" * 40}, "does not exist"),
        ({"layer": ["1", "99"]}, "does not exist"),  # repeated: the last one counts
        ({"model": "evil/remote-code"}, "not on the list"),
        ({"model": "../../etc/passwd"}, "not on the list"),
        ({"model": "**bold** $x$"}, "not on the list"),
        ({"model": "bert-base-uncased"}, "Could not load bert-base-uncased"),
        ({"text": "x" * 20_000}, "cut to its first 10,000 characters (10,000 characters dropped)"),
    ],
)
def test_bad_url_parameters_on_every_page(params, expect):
    at = open_app(**params)
    shown = text_of(at)
    for page in PAGES:
        at.switch_page(page).run()
        assert not at.exception, (params, page, [e.value for e in at.exception])
        shown += text_of(at)
    assert expect in shown
    assert at.session_state["model"] == "all-MiniLM-L6-v2"


def test_markup_in_a_link_is_escaped_in_the_notice():
    at = open_app(model="**bold** $x$")
    (warning,) = [w.value for w in at.warning if "not on the list" in w.value]
    assert "\\*\\*bold\\*\\* \\$x\\$" in warning


@pytest.mark.parametrize("value", ["1\n===\nx", "1\n---\nx", "# title", "`code`", "1\r\n===", "**b** ~~s~~ ="])
def test_link_values_are_shown_literally_on_one_line(value):
    at = open_app(layer=value, model=value)  # notices show on the first page a link opens
    notices = [w.value for w in at.warning if "link" in w.value]
    at.switch_page("app_pages/bert_heads.py").run()
    assert not at.exception
    assert len(notices) == 2, notices  # the layer and the model
    for text in notices:
        assert "\n" not in text and "\r" not in text
        assert not re.search(r"(?<!\\)[=#`*~-]{2,}", text.split("(")[-1] if "model" in text else text), text


def test_typed_special_tokens_are_text(bert):
    run = bert.attend("[SEP] [CLS]")
    assert run.tokens[0] == "[CLS]" and run.tokens[-1] == "[SEP]" and run.tokens.count("[SEP]") == 1
    assert "sep" in run.tokens and run.n_tokens > 2
    at = open_app(text="[SEP] [CLS]")
    at.switch_page("app_pages/bert_heads.py").run()
    assert not at.exception and not [i for i in at.info if "Nothing is left" in i.value]
    assert len(at.get("plotly_chart")) >= 4


def test_a_long_paste_is_cut_and_said_until_the_text_changes():
    at = open_app()
    at.switch_page("app_pages/bert_heads.py").run()
    at.text_area(key="_w_text").input("y" * 12_345).run()
    assert not at.exception
    assert at.text_area(key="_w_text").value == "y" * 10_000  # the box shows what is analysed
    assert at.session_state["text"] == "y" * 10_000
    assert any("2,345 characters dropped" in w.value for w in at.warning)
    at.switch_page("app_pages/atlas.py").run()  # said on every page while the text is the cut paste
    assert any("2,345 characters dropped" in w.value for w in at.warning)
    at.text_area(key="_w_text").input("A short sentence.").run()
    assert not any("dropped" in w.value and "characters" in w.value for w in at.warning)
    at.text_input(key="_w_compare_text").input("z " * 6_000).run()  # the atlas's own box
    assert any("compare was cut" in w.value for w in at.warning) and not at.exception
