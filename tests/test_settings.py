"""Every page runs on the default sentence, and its settings survive a switch to another page
and back (one AppTest per page); every key a session holds is declared in ui/settings.py with
its type."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from livetest import ROOT
from ui import settings
from ui.pages import PAGES

TIMEOUT = 120

# per page: (widget kind, setting, a value other than its default)
CHANGES = {
    "lesson.py": [("radio", "q_one-query:", 0)],  # step 1's question, answered
    "overview.py": [("text_area", "text", "Dogs chase cats.")],
    "glossary.py": [("text_input", "text_b", "Cats sleep.")],
    "classroom.py": [("text_input", "text_b", "Dogs bark.")],  # the class page keeps the sidebar's link
    "build.py": [("selectbox", "build_heads", 6), ("toggle", "build_scale", False), ("selectbox", "build_follow", 2)],
    "bert_heads.py": [("toggle", "heads_merge", True), ("multiselect", "heads_overlay", [1, 3])],
    "collapse.py": [("slider", "collapse_alpha", 0.8), ("multiselect", "collapse_roles", ["q", "k"])],
    "subspaces.py": [("slider", "subspaces_alpha", 0.3), ("selectbox", "subspaces_token", 4)],
    "sharing.py": [("select_slider", "sharing_steps", 250), ("number_input", "sharing_seed", 3)],
    "atlas.py": [("selectbox", "atlas_measure", "to next"), ("text_input", "compare_text", "A cat sat.")],
    "why_heads.py": [("selectbox", "why_heads", 8), ("number_input", "why_seed", 5)],
    "heads_needed.py": [("number_input", "needed_least", 3), ("multiselect", "needed_remove", [(0, 1)])],
}


def widget(at: AppTest, kind: str, key: str):
    """The widget showing setting `key` (quiz answers: the first whose key starts with it)."""
    if key.startswith("q_"):
        return next(w for w in getattr(at, kind) if str(w.key).startswith(settings.widget_key(key)))
    return getattr(at, kind)(key=settings.widget_key(key))


def set_value(at: AppTest, kind: str, key: str, value) -> None:
    w = widget(at, kind, key)
    if kind in ("text_area", "text_input"):
        w.input(value).run()
    elif kind == "multiselect":
        for v in w.value:
            w.unselect(v)
        for v in value:
            w.select(v)
        w.run()
    else:
        w.set_value(value).run()


def test_every_page_has_a_change():
    assert sorted(CHANGES) == sorted(p.file for p in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.file)
def test_settings_survive_a_page_switch(page):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
    at.switch_page(page.path).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title, page.file
    if page.file in ("build.py", "bert_heads.py"):
        assert len(at.get("plotly_chart")) >= 4
    for kind, key, value in CHANGES[page.file]:
        set_value(at, kind, key, value)
    assert not at.exception, [e.value for e in at.exception]
    other = PAGES[1] if page is PAGES[0] else PAGES[0]
    at.switch_page(other.path).run()
    at.switch_page(page.path).run()
    assert not at.exception, [e.value for e in at.exception]
    for kind, key, value in CHANGES[page.file]:
        w = widget(at, kind, key)
        assert w.value == value, (page.file, key, w.value, value)
        assert at.session_state[w.key.removeprefix(settings.widget_key(""))] == value, (page.file, key)
    # the page's link (its query string) opens the same view in a new session
    link = {k: v[0] if isinstance(v, list) else v for k, v in at.query_params.items()}
    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    fresh.query_params.update(link)
    fresh.run().switch_page(page.path).run()
    assert not fresh.exception, [e.value for e in fresh.exception]
    for kind, key, value in CHANGES[page.file]:
        if not key.startswith("q_"):  # quiz answers stay with the learner
            assert widget(fresh, kind, key).value == value, (page.file, key, link)
    # every key the session holds is declared, with a value of its declared type
    for key in at.session_state:
        if key.startswith((settings.widget_key(""), *settings.ELEMENT_PREFIXES)) or key in settings.ELEMENTS:
            continue
        prefix = next((p for p in settings.STATE_PREFIXES if key.startswith(p)), None)
        if key in settings.STATE or prefix:
            kind = settings.STATE.get(key) or settings.STATE_PREFIXES[prefix]
        else:
            kind = settings.declared(key).type
        assert isinstance(at.session_state[key], kind), (key, type(at.session_state[key]))


def test_a_kept_number_out_of_range_goes_back_to_its_default():
    """A value kept from a larger model (144 heads) is out of range on the bundled one (72)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
    at.switch_page("app_pages/heads_needed.py").run()
    at.session_state["needed_least"] = 100
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.number_input(key=settings.widget_key("needed_least")).value == 0 == at.session_state["needed_least"]


@pytest.mark.parametrize(
    "params,said",
    [
        ({"collapse_alpha": "lots"}, "collapse_alpha='lots' cannot be used"),
        ({"atlas_measure": "nonsense"}, "atlas_measure='nonsense' is not available here"),
        ({"needed_least": "999"}, "needed_least='999' is not available here"),
    ],
)
def test_a_link_value_the_page_cannot_use_is_named(params, said):
    page = {"collapse_alpha": "collapse.py", "atlas_measure": "atlas.py", "needed_least": "heads_needed.py"}[
        next(iter(params))
    ]
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    at.query_params.update(params)
    shown = " ".join(w.value for w in at.run().warning)  # a link opens the lesson first
    at.switch_page(f"app_pages/{page}").run()
    assert not at.exception, [e.value for e in at.exception]
    shown += " ".join(w.value for w in at.warning)
    assert said.replace("'", "") in shown.replace("'", "").replace("’", ""), shown


def test_a_link_with_shared_on_turned_off_goes_back_to_distinct_heads():
    """Subspaces opened from a link with Shared on (alpha 1.0 in the link): turning Shared off shows
    the page's own alpha (0, distinct heads) and separate panels, not 1.0 and one merged picture."""
    from streamlit.testing.v1 import AppTest

    from livetest import ROOT

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.query_params["subspaces_shared"] = "1"
    at.query_params["subspaces_alpha"] = "1.0"
    at.run()
    at.switch_page("app_pages/subspaces.py").run()
    assert at.toggle(key="_w_subspaces_shared").value and at.slider(key="_w_subspaces_alpha").value == 1.0
    at.toggle(key="_w_subspaces_shared").set_value(False).run()
    assert not at.exception and at.slider(key="_w_subspaces_alpha").value == 0.0
    assert any("different pictures" in i.value for i in at.info)
