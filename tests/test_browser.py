"""A real Streamlit server and a real Chromium (Playwright): type, switch pages, check, screenshot."""

from __future__ import annotations

import pytest
from conftest import chromium_or_skip

import livetest
from livetest import CHROMIUM_FLAGS, DEADLINE_MS, ROOT, streamlit_server
from mha.lesson import steps
from ui.pages import PAGES as SPECS

N = len(steps.STEPS)  # the lesson's step count, as the lesson has it

ARTIFACTS = ROOT / "artifacts"
PAGES = [p.url_path for p in SPECS]  # sidebar order


@pytest.fixture(scope="module")
def server():
    chromium_or_skip()
    with streamlit_server() as live:
        LIVE["pid"] = live.process.pid  # for the memory it has used (test_a_replica_stays_under_its_limit)
        yield live.url


LIVE: dict[str, int] = {}


@pytest.fixture(scope="module")
def browser():
    exe = chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)
        yield b
        b.close()


def wait_idle(page, timeout=240_000):
    """Wait for the run the last action started to finish, and for the page to draw. Generous: a
    fresh server's first visit to "Do we need every head?" measures all 72 heads (~30 s alone)."""
    livetest.wait_idle(page, timeout)
    page.wait_for_timeout(300)


def go(page, name: str) -> None:
    """Click page `name` in the sidebar's navigation and wait for it to be drawn."""
    page.locator('[data-testid="stSidebarNav"] a').nth(PAGES.index(name)).click()
    wait_idle(page)


def open_and_type(browser, server: str, text: str, viewport: dict | None = None, on_request=None):
    """A new page on the app with `text` typed into the sidebar; returns (page, dialogs seen).
    on_request: called with every request the page makes, from its first."""
    page = browser.new_page(viewport=viewport or {"width": 1400, "height": 1000})
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    if on_request:
        page.on("request", on_request)
    page.goto(server, wait_until="domcontentloaded")
    page.wait_for_selector('[data-testid="stSidebar"] textarea', timeout=DEADLINE_MS)
    wait_idle(page)
    box = page.locator('[data-testid="stSidebar"] textarea').first
    box.fill(text)
    box.press("Control+Enter")
    wait_idle(page)
    return page, dialogs


AXE = ROOT / ".ci" / "axe" / "node_modules" / "axe-core" / "axe.min.js"  # npm's axe-core, installed by .ci/run
AXE_RUN = """async () => (await axe.run(document, {runOnly: ['wcag2a', 'wcag2aa', 'best-practice']})).violations
  .map(v => ({id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.target.join(' '))}))"""


FIRST_SCREEN = """(main_selector) => {
  // the page's main picture (first chart, diagram or table, or main_selector) and, over the whole page: the
  // smallest chart label, the lowest contrast of chart text on white (WCAG relative luminance), and what is
  // cut off: chart text outside its figure, page text hidden by overflow or ending in an ellipsis
  const main = document.querySelector('[data-testid="stMain"]');
  const pic = main.querySelector(main_selector || '[data-testid="stPlotlyChart"], [data-testid="stGraphVizChart"], '
    + '[data-testid="stDataFrame"], [data-testid="stTable"]');
  const lum = (c) => {
    const v = c.match(/[\\d.]+/g).slice(0, 3).map(Number).map(x => x / 255)
      .map(x => x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4));
    return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
  };
  let small = 99, contrast = 99;
  const cut = [];
  const labels = '[data-testid="stPlotlyChart"] svg text, [data-testid="stGraphVizChart"] svg text';
  for (const t of main.querySelectorAll(labels)) {
    const r = t.getBoundingClientRect();
    if (!t.textContent.trim() || r.height === 0) continue;
    const svg = t.ownerSVGElement, box = svg && svg.viewBox && svg.viewBox.baseVal;
    const scale = box && box.width ? svg.getBoundingClientRect().width / box.width : 1;  // a scaled diagram
    const style = getComputedStyle(t);
    small = Math.min(small, parseFloat(style.fontSize) * scale);
    const onWhite = !t.closest('.heatmaplayer');  // a cell's number sits on its colour, not on white
    if (onWhite && style.fill.startsWith('rgb')) contrast = Math.min(contrast, 1.05 / (lum(style.fill) + 0.05));
    const outer = t.closest('[data-testid="stPlotlyChart"] svg.main-svg');
    if (outer) {
      const b = outer.getBoundingClientRect();
      if (r.left < b.left - 1 || r.right > b.right + 1 || r.top < b.top - 1 || r.bottom > b.bottom + 1)
        cut.push('chart: ' + t.textContent.slice(0, 40));
    }
  }
  for (const e of document.querySelectorAll('[data-testid="stMain"] *, [data-testid="stSidebar"] *')) {
    if (e.closest('.katex') || !e.textContent.trim() || !e.clientWidth || e.closest('svg')) continue;
    const style = getComputedStyle(e);
    const hides = style.overflowX !== 'visible' || style.textOverflow === 'ellipsis';
    const over = e.scrollWidth - e.clientWidth;  // typeset maths pokes out of its box by a pixel or two
    if (hides && over > (e.querySelector('.katex') ? 4 : 1) && !['auto', 'scroll'].includes(style.overflowX))
      cut.push('text: ' + e.textContent.slice(0, 40));
  }
  // crowded: tick labels of one axis that run into each other (level or upright ones: a tilted label's box
  // is wider than its text); scrolled: tables whose columns or rows are hidden until scrolled to
  const straight = (t) => {
    const turn = (t.getAttribute('transform') || '') + (t.parentNode.getAttribute('transform') || '');
    const m = turn.match(/rotate\\((-?[\\d.]+)/);
    return !m || Math.abs(parseFloat(m[1])) % 90 === 0;
  };
  let crowded = 0;
  for (const layer of main.querySelectorAll('[data-testid="stPlotlyChart"] .xaxislayer-above, '
    + '[data-testid="stPlotlyChart"] .yaxislayer-above')) {
    const boxes = [...layer.querySelectorAll('.xtick text, .ytick text')].filter(straight)
      .map(t => t.getBoundingClientRect()).filter(b => b.width > 0);
    for (let i = 1; i < boxes.length; i++) {
      const a = boxes[i - 1], b = boxes[i];
      if (a.right > b.left + 1 && a.left < b.right - 1 && a.bottom > b.top + 1 && a.top < b.bottom - 1) crowded++;
    }
  }
  const scrolled = [...main.querySelectorAll('[data-testid="stDataFrame"] .dvn-scroller')]
    .filter(e => e.scrollWidth > e.clientWidth + 1 || e.scrollHeight > e.clientHeight + 1).length;
  // a legend over an axis title (a phone's wrapped legend grew up into "alpha")
  let covered = 0;
  for (const fig of main.querySelectorAll('[data-testid="stPlotlyChart"] .main-svg')) {
    const legend = fig.querySelector('.legend');
    if (!legend) continue;
    const l = legend.getBoundingClientRect();
    for (const t of fig.querySelectorAll('.g-xtitle text, .g-ytitle text, .g-y2title text')) {
      const b = t.getBoundingClientRect();
      if (b.width && l.right > b.left + 1 && l.left < b.right - 1 && l.bottom > b.top + 1 && l.top < b.bottom - 1)
        covered++;
    }
  }
  const top = pic ? pic.getBoundingClientRect().top : null;
  return {top: top, small: small, contrast: contrast, cut: cut, crowded: crowded, scrolled: scrolled, covered: covered};
}"""


MAIN = {  # pages whose main element is not a picture: the button that trains, the first definition
    "why_heads": '[data-testid="stBaseButton-primary"]',
    "glossary": '[data-testid="stHeading"] h2',
    "classroom": '[data-testid="stHeading"] h2',  # "Join a class"
}


def test_type_switch_pages_and_screenshot(server, browser):
    """Every page on a 1280 x 720 projector: the typed sentence survives the switch; the main
    picture (the lesson's once answered, scrolled to) starts on the first screen; no chart label is
    under 12 px or under 4.5:1 on white; no text is cut off; an axe-core audit (WCAG 2
    A/AA and axe's best practices) finds no violation of any impact (artifacts/axe.json); no
    request leaves the machine (favicon and icons included)."""
    import json
    from urllib.parse import urlparse

    ARTIFACTS.mkdir(exist_ok=True)
    if not AXE.exists():
        import os

        why = "axe-core is not installed: npm install --prefix .ci/axe axe-core@4.14.1 (.ci/run does)"
        pytest.fail(why) if os.environ.get("CI", "").lower() == "true" else pytest.skip(why)
    text = "The cat chased the other cat across the garden."
    hosts = set()
    page, dialogs = open_and_type(
        browser, server, text, {"width": 1280, "height": 720}, lambda request: hosts.add(urlparse(request.url).hostname)
    )
    found, screens = {}, {}
    for name in PAGES:
        go(page, name)
        page.wait_for_selector("h1", timeout=DEADLINE_MS)
        # the typed sentence survives every page switch
        assert page.locator('[data-testid="stSidebar"] textarea').first.input_value() == text, name
        assert page.locator('[data-testid="stException"]').count() == 0, name
        main = MAIN.get(name)
        if name == "lesson":  # the picture comes with the answer, and the page scrolls to it
            page.get_by_text("1 word", exact=True).click()
            wait_idle(page)
        if main is None:
            page.wait_for_selector(
                '[data-testid="stPlotlyChart"] .main-svg, [data-testid="stGraphVizChart"] svg', timeout=DEADLINE_MS
            )
        page.wait_for_timeout(2500 if name == "lesson" else 500)
        if name == "lesson":  # the feedback at the top (the page scrolls there; the phone test checks it): the
            page.evaluate(  # picture it unlocks is on the same screen
                """() => document.querySelector('[data-testid="stMain"] [data-testid="stAlert"]')"""
                """.scrollIntoView({block: 'start'})"""
            )
            page.wait_for_timeout(300)
        screens[name] = page.evaluate(FIRST_SCREEN, main)
        assert screens[name]["top"] is not None and 0 <= screens[name]["top"] < 720 - 150, (name, screens[name])
        assert screens[name]["small"] >= 12 and screens[name]["contrast"] >= 4.5, (name, screens[name])
        assert not screens[name]["cut"], (name, screens[name])
        # every table whole on a projector (no hidden column or row), no tick labels run together
        assert screens[name]["crowded"] == 0 and screens[name]["scrolled"] == 0, (name, screens[name])
        if name in ("build", "bert_heads"):
            assert page.locator('[data-testid="stPlotlyChart"]').count() >= 3, name
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=name == "overview")
        page.add_script_tag(path=str(AXE))
        found[name] = page.evaluate(AXE_RUN)
    (ARTIFACTS / "axe.json").write_text(json.dumps(found, indent=1))
    (ARTIFACTS / "first_screen_1280x720.json").write_text(json.dumps(screens, indent=1))
    bad = {n: [(v["id"], v["impact"]) for v in found[n]] for n in found}  # none of any impact, best practice too
    assert not any(bad.values()), bad
    assert "chased" in page.url or "text=" in page.url  # the sentence is in the shareable link
    assert dialogs == []
    assert hosts and hosts <= {"127.0.0.1", "localhost"}, hosts


MARKUP = "<img src=x onerror=alert(1)> <script>alert(2)</script> **bold** $x$"


def test_markup_and_script_are_shown_literally_and_never_run(server, browser):
    ARTIFACTS.mkdir(exist_ok=True)
    page, dialogs = open_and_type(browser, server, MARKUP)
    go(page, "bert_heads")
    page.wait_for_selector('[data-testid="stPlotlyChart"]', timeout=DEADLINE_MS)
    page.wait_for_timeout(1000)
    assert dialogs == []
    assert page.locator('img[src="x"]').count() == 0
    scripts = page.evaluate("[...document.scripts].map(s => s.textContent).join(' ')")
    assert "alert(2)" not in scripts
    assert page.locator("b", has_text="bold").count() == 0 and page.locator("strong", has_text="bold").count() == 0
    page.mouse.wheel(0, 1500)  # charts below the fold draw when scrolled to
    page.wait_for_timeout(1500)
    labels = page.locator('[data-testid="stPlotlyChart"] svg text').all_text_contents()
    assert "<" in labels and ">" in labels and "script" in labels  # tokens, as literal text
    assert page.locator('[data-testid="stException"]').count() == 0
    for name in ("atlas", "collapse", "build"):
        go(page, name)
        assert dialogs == [] and page.locator('img[src="x"]').count() == 0, name
        assert page.locator('[data-testid="stException"]').count() == 0, name
    page.screenshot(path=str(ARTIFACTS / "markup.png"))


READ_PANELS = """() => {
  for (const el of document.querySelectorAll('.js-plotly-plot')) {
    const t = (el.layout && el.layout.title && el.layout.title.text) || '';
    if (!t.includes('queries (●)')) continue;
    const pick = (name) => el._fullData.filter(d => d.name === name).map(d => [Array.from(d.x), Array.from(d.y)]);
    const rings = el._fullData.filter(d => (d.name || '').startsWith('query “')).map(d => [d.x[0], d.y[0], d.text[0]]);
    return {title: t, queries: pick('queries'), keys: pick('keys'), rings: rings};
  }
  return null;
}"""


def read_panels(page, until=lambda got: True):
    """The subspace panels' points, once `until(panels)` holds (or the last ones read, after 15 s)."""
    got = None
    for _ in range(60):
        got = page.evaluate(READ_PANELS)
        if got is not None and until(got):
            return got
        page.wait_for_timeout(250)
    if got is None:
        raise AssertionError("no subspace panels on the page")
    return got


def test_subspaces_page_follows_a_token_and_folds_into_one_picture(server, browser, bert):
    import numpy as np

    from mha.analyses import subspaces

    ARTIFACTS.mkdir(exist_ok=True)
    text = "The mole on his arm was not a mole but a rare insect."
    page, dialogs = open_and_type(browser, server, text)
    go(page, "subspaces")
    got = read_panels(page)
    run = bert.attend(text)
    expect = subspaces.layer_maps(bert, run, 0)
    assert len(got["queries"]) == bert.n_heads
    np.testing.assert_allclose(np.array(got["queries"][5]).T, expect.queries[5], atol=1e-4)
    # pick another token: it is ringed in every panel, at its own query point
    arm = run.tokens.index("arm")
    page.get_by_test_id("stSelectbox").filter(has_text="Token to follow").click()
    page.get_by_role("option", name=f"{arm}: arm").click()
    wait_idle(page)
    got = read_panels(page, until=lambda got: got["rings"] and got["rings"][0][2] == "arm")
    assert [r[2] for r in got["rings"]] == ["arm"] * bert.n_heads
    np.testing.assert_allclose([r[0] for r in got["rings"]], expect.queries[:, arm, 0], atol=1e-4)
    page.screenshot(path=str(ARTIFACTS / "subspaces.png"), full_page=False)
    # shared Q, K and V (alpha = 1): every panel draws the same points
    page.get_by_test_id("stCheckbox").get_by_text("Shared (alpha = 1)").click()
    wait_idle(page)
    got = read_panels(page, until=lambda got: "alpha = 1.00" in got["title"])
    queries = np.array(got["queries"])  # (H, 2, T)
    keys = np.array(got["keys"])
    assert "alpha = 1.00" in got["title"]
    assert np.abs(queries - queries[:1]).max() < 1e-5 and np.abs(keys - keys[:1]).max() < 1e-5
    assert page.get_by_text("are the same picture").count() == 1
    assert page.locator('[data-testid="stException"]').count() == 0 and dialogs == []
    page.screenshot(path=str(ARTIFACTS / "subspaces_shared.png"), full_page=False)
    page.close()
    # on a 1366 x 768 laptop: the animation's 12 panels and its Play button on one screen, and the token
    # followed by default a content word ("mole"), not the sentence's second token ("my")
    page, _ = open_and_type(browser, server, "Then my sister painted the old garden gate bright blue.", LAPTOP)
    go(page, "subspaces")
    box = page.get_by_test_id("stSelectbox").filter(has_text="Token to follow")
    picker = _picker_text(page, box, ["sister"])
    assert "sister" in picker and ": my" not in picker, picker
    page.get_by_test_id("stCheckbox").get_by_text("Show the animation").click()
    wait_idle(page)
    chart = page.locator('[data-testid="stPlotlyChart"]').filter(has=page.locator(".updatemenu-button")).first
    chart.wait_for(timeout=DEADLINE_MS)
    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    play = chart.locator(".updatemenu-button").first.bounding_box()
    panels = chart.locator(".nsewdrag").evaluate_all("els => els.map(e => e.getBoundingClientRect().bottom)")
    page.evaluate(f"window.scrollBy(0, {box['y']} - 70)")  # the chart's top under Streamlit's header
    box = chart.bounding_box()
    play = chart.locator(".updatemenu-button").first.bounding_box()
    bottom = max(chart.locator(".nsewdrag").evaluate_all("els => els.map(e => e.getBoundingClientRect().bottom)"))
    assert len(panels) == bert.n_heads and play["y"] >= 0 and bottom <= LAPTOP["height"], (box, play, bottom)
    page.screenshot(path=str(ARTIFACTS / "subspaces_animation_1366.png"), full_page=False)
    page.close()


LAPTOP = {"width": 1366, "height": 768}

FOCUSED = """(kind) => {
  const el = document.activeElement;
  if (!el || !el.closest('[data-testid="stMain"]')) return false;
  if (kind === 'next') return (el.innerText || '').includes('Next');
  if (kind === 'number') return el.type === 'number' && el.value === '';
  return el.type === kind;
}"""


def tab_to(page, kind: str, most: int = 80) -> None:
    """Press Tab until the focus is on the lesson's `kind` of control ("radio", an empty "number",
    the "next" button): the keyboard alone reaches it."""
    for _ in range(most):
        page.keyboard.press("Tab")
        if page.evaluate(FOCUSED, kind):
            return
    raise AssertionError(f"Tab never reached a {kind} control")


def test_lesson_by_keyboard_then_every_step_check_question_and_a_tool_link(server, browser, bert):
    """Steps 1 and 2 with the keyboard alone (predict first: no picture before the answer); step 3
    with one head twice; the check question; a tool page and back keeps the score and answers."""
    ARTIFACTS.mkdir(exist_ok=True)
    text = "The mole on his arm was not a mole but a rare insect."
    page, dialogs = open_and_type(browser, server, text)
    go(page, "lesson")
    page.wait_for_selector(f"text=Step 1 of {N}", timeout=DEADLINE_MS)
    assert page.locator('[data-testid="stMain"] [data-testid="stPlotlyChart"]').count() == 0  # predict first
    tab_to(page, "radio")
    page.keyboard.press("Space")  # answers with the focused option
    wait_idle(page)
    page.wait_for_selector('[data-testid="stMain"] [data-testid="stPlotlyChart"] .main-svg', timeout=DEADLINE_MS)
    tab_to(page, "next")
    page.keyboard.press("Enter")
    wait_idle(page)
    page.wait_for_selector(f"text=Step 2 of {N}", timeout=DEADLINE_MS)
    assert page.locator('[data-testid="stGraphVizChart"]').count() == 0  # the diagram would print the answer
    T, D = len(bert.attend(text).tokens), bert.d_model // bert.n_heads
    for value in (T, D):
        tab_to(page, "number")
        page.keyboard.type(str(value))
        page.keyboard.press("Enter")
        wait_idle(page)
    page.wait_for_selector("text=Right:", timeout=DEADLINE_MS)
    page.wait_for_selector('[data-testid="stGraphVizChart"] svg', timeout=DEADLINE_MS)
    tab_to(page, "next")
    page.keyboard.press("Enter")
    wait_idle(page)
    page.wait_for_selector(f"text=Step 3 of {N}", timeout=DEADLINE_MS)
    # one head twice: predict first, then the panels, named by the heads chosen
    page.get_by_test_id("stSelectbox").filter(has_text="Second head").click()
    page.get_by_role("option", name="head 0").click()
    wait_idle(page)
    assert page.locator('[data-testid="stMain"] [data-testid="stPlotlyChart"]').count() == 0
    page.get_by_text("The same key in both heads").click()
    wait_idle(page)
    page.wait_for_selector("text=Layer 0: heads 0 and 0", timeout=DEADLINE_MS)
    assert page.get_by_text("Both panels are head 0").count() == 1 and page.get_by_text("Right. Head 0 gives").count()
    for step in range(3, N + 1):
        page.wait_for_selector(f"text=Step {step} of {N}", timeout=DEADLINE_MS)
        assert f"step={steps.KEYS[step - 1]}" in page.url
        assert page.locator('[data-testid="stException"]').count() == 0, step
        if step == 6:  # the check question: predict, then do it, then see
            page.get_by_text("Every head computes the same attention").click()
            wait_idle(page)
            page.get_by_test_id("stCheckbox").filter(has_text="Share").first.click()
            wait_idle(page)
            page.wait_for_selector("text=divergence between heads fell", timeout=DEADLINE_MS)
            assert page.get_by_text("Right: no two heads' attention now differs at all").count() == 1
        if step < N:
            page.get_by_role("button", name="Next →").click()
            wait_idle(page)
    score = page.get_by_test_id("stMetric").filter(has_text="Right at the first try").inner_text()
    assert "of 4" in score  # steps 1, 2, 3 and the check question; steps 2, 3 and the check question right
    right = int(score.split("try")[-1].split("of")[0])
    assert right >= 3
    # step 5's link opens the atlas on the previous-token head, with the same sentence
    for _ in range(3):
        page.get_by_role("button", name="← Back").click()
        wait_idle(page)
    page.wait_for_selector(f"text=Step 5 of {N}", timeout=DEADLINE_MS)
    from mha.lesson import answers

    _, best, _ = answers.previous_token_question(bert.attend(text))
    page.get_by_text("Every measure of every head: Head atlas").click()
    wait_idle(page)
    page.wait_for_selector("h1:has-text('Head atlas')", timeout=DEADLINE_MS)
    assert "/atlas" in page.url and f"layer={best[0]}" in page.url and f"head={best[1]}" in page.url
    assert page.locator('[data-testid="stSidebar"] textarea').first.input_value() == text
    # the atlas describes the head it shows: the link's layer and head
    page.wait_for_selector(f"text=Layer {best[0]}, head {best[1]} (", timeout=DEADLINE_MS)
    # and back: the lesson keeps its score, and step 6's answer is still given
    go(page, "lesson")
    page.wait_for_selector(f"text=Step 5 of {N}", timeout=DEADLINE_MS)
    assert page.get_by_test_id("stMetric").filter(has_text="Right at the first try").inner_text() == score
    page.get_by_role("button", name="Next →").click()
    wait_idle(page)
    page.wait_for_selector(f"text=Step 6 of {N}", timeout=DEADLINE_MS)
    assert page.get_by_text("Right: no two heads' attention now differs at all").count() == 1
    assert dialogs == [] and page.locator('[data-testid="stException"]').count() == 0
    # a link opened anew (a new tab: a new session) keeps the score: this browser's session cookie
    tab = browser.new_context(viewport={"width": 1400, "height": 1000})  # the same browser: its cookies
    tab.add_cookies(page.context.cookies())
    again = tab.new_page()
    again.goto(page.url, wait_until="domcontentloaded")
    again.wait_for_selector(f"text=Step 6 of {N}", timeout=DEADLINE_MS)
    wait_idle(again)
    assert again.get_by_test_id("stMetric").filter(has_text="Right at the first try").inner_text() == score
    tab.close()


def test_lesson_recap_and_glossary_on_a_phone_and_a_wide_screen(server, browser):
    """Step 1 (answered: its picture in view, then Next opens step 2 at its top), the recap and
    the glossary at 390 and 1500 px: nothing wider than the screen, no chart text under 12 px or
    4.5:1, nothing cut off, no traceback; screenshots in artifacts/."""
    ARTIFACTS.mkdir(exist_ok=True)
    for width, height in ((390, 844), (1500, 1000)):
        page = browser.new_page(viewport={"width": width, "height": height})
        page.goto(f"{server}/?step={steps.KEYS[0]}", wait_until="domcontentloaded")
        wait_idle(page)
        page.wait_for_selector(f"text=Step 1 of {N}", timeout=DEADLINE_MS)
        assert page.locator('[data-testid="stPlotlyChart"]').count() == 0  # predict first
        # the question and its first option on the first screen, not below the score and the terms
        option = page.get_by_text("1 word", exact=True).bounding_box()
        assert option is not None and option["y"] + option["height"] <= height, (width, option)
        page.get_by_text("1 word", exact=True).click()
        wait_idle(page)
        page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=DEADLINE_MS)
        page.wait_for_timeout(2500)  # the page scrolls to the answer's feedback as the chart arrives
        screen = page.evaluate(FIRST_SCREEN, None)
        assert 0 <= screen["top"] < height - 100, (width, screen)  # the picture the answer unlocked is in view
        assert screen["contrast"] >= 4.5 and screen["small"] >= 12 and not screen["cut"], (width, screen)
        # the map itself at least half the chart's width (it was 100 of 358 px on a phone), no labels run together
        chart = page.locator('[data-testid="stPlotlyChart"]').first.bounding_box()
        cells = page.locator('[data-testid="stPlotlyChart"] .nsewdrag').first.bounding_box()
        assert cells["width"] >= 0.5 * chart["width"] and screen["crowded"] == 0, (width, chart, cells, screen)
        page.get_by_role("button", name="Next →").click()  # the next step opens at its top, not mid-page
        wait_idle(page)
        page.wait_for_selector(f"text=Step 2 of {N}", timeout=DEADLINE_MS)
        page.wait_for_timeout(2500)
        title = page.get_by_text(f"Step 2 of {N}").bounding_box()
        assert title is not None and 0 <= title["y"] < 400, (width, title)
        page.goto(f"{server}/?step={steps.KEYS[0]}", wait_until="domcontentloaded")
        page.wait_for_selector(f"text=Step 1 of {N}", timeout=DEADLINE_MS)
        wait_idle(page)
        shots = {"step1": None}
        for name, url, marker in (
            ("step1", None, None),
            ("recap", f"{server}/?step={steps.KEYS[-1]}", "text=The check question, answered on your sentence"),
            ("glossary", f"{server}/glossary", "text=Representation subspace"),
            ("collapse", f"{server}/collapse", "text=The answer, in numbers"),
            ("sharing", f"{server}/sharing", "text=Layer 0 alone"),
        ):
            if url:
                page.goto(url, wait_until="domcontentloaded")
                page.wait_for_selector(marker, timeout=DEADLINE_MS)
                wait_idle(page)
            assert page.locator('[data-testid="stException"]').count() == 0, (width, name)
            scroll = page.evaluate("document.documentElement.scrollWidth")
            assert scroll <= width + 10, (width, name, scroll)  # nothing wider than the screen
            screen = page.evaluate(FIRST_SCREEN, None)
            assert screen["contrast"] >= 4.5 and screen["small"] >= 12 and not screen["cut"], (width, name, screen)
            assert screen["covered"] == 0 and screen["crowded"] == 0, (width, name, screen)
            shots[name] = ARTIFACTS / f"{name}_{width}px.png"
            page.screenshot(path=str(shots[name]), full_page=True)
        page.close()


def test_a_paste_longer_than_the_limit_is_cut_with_a_notice(server, browser):
    from ui import MAX_CHARS

    long_text = "Zebras graze near the river. " * 450  # 13,050 characters
    page, dialogs = open_and_type(browser, server, "A short sentence first.")
    go(page, "bert_heads")
    box = page.locator('[data-testid="stSidebar"] textarea').first
    box.fill(long_text)  # one edit, as a paste is
    box.press("Control+Enter")
    wait_idle(page)
    # the box holds what is analysed: the first MAX_CHARS characters of the paste
    assert box.input_value() == long_text[:MAX_CHARS]
    page.wait_for_selector(f"text=cut to its first {MAX_CHARS:,} characters", timeout=DEADLINE_MS)
    page.wait_for_selector("text=maximum of 512 tokens", timeout=DEADLINE_MS)  # the long text is what runs
    assert "Zebras" in page.url
    assert dialogs == [] and page.locator('[data-testid="stException"]').count() == 0


def test_why_heads_keeps_its_settings_and_says_when_training_was_interrupted(server, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{server}/why_heads", wait_until="domcontentloaded")
    wait_idle(page)
    seed = page.get_by_label("Seed")
    seed.fill("5")
    seed.press("Enter")
    wait_idle(page)
    page.get_by_role("button", name="Train the five models").click()
    page.wait_for_selector("text=still training", timeout=DEADLINE_MS)  # it is training
    go(page, "bert_heads")  # leave mid-run
    page.wait_for_selector("h1:has-text('Attention heads')", timeout=DEADLINE_MS)
    go(page, "why_heads")
    page.wait_for_selector("text=was interrupted at step", timeout=DEADLINE_MS)
    assert "seed 5" in page.locator('[data-testid="stAlert"]').first.inner_text()
    assert page.get_by_label("Seed").input_value() == "5"  # the setting survived both switches
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()


def _picker_text(page, box, labels: list[str], timeout_s: float = 30.0) -> str:
    """What a picker shows (its text and its inputs' values), once every label is in it or after
    timeout_s. A fresh browser context fetches a widget's code on first use (Streamlit lazy-loads
    Selectbox.*.js and the like), so an idle page can still hold its empty container for a moment:
    CI saw the atlas's selectbox read '' 300 ms after the run had finished."""
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        inputs = box.locator("input")
        shown = box.inner_text() + " ".join(inputs.nth(i).input_value() for i in range(inputs.count()))
        if all(label in shown or label.upper() in shown for label in labels) or time.monotonic() > deadline:
            return shown
        page.wait_for_timeout(200)


def test_a_copied_link_opens_every_page_with_its_settings(server, browser):
    """A teacher's link for every page, opened in a new browser (nothing shared with the session
    that made it): each setting tests/test_settings.py changes is in the widget it belongs to, no
    notice says a value was dropped, and the page keeps the setting in its link."""
    from urllib.parse import parse_qs, urlencode, urlparse

    from test_settings import CHANGES

    from ui.pages import PAGES as SPECS
    from ui.settings import to_url, widget_key

    for spec in SPECS:
        changes = [(kind, key, value) for kind, key, value in CHANGES[spec.file] if not key.startswith("q_")]
        if all(key in ("text", "text_b") for _, key, _ in changes):
            continue  # the sentence: every test here opens links with one
        extra = {"layer": "2", "head": "3", "heads_hide": "1"} if spec.url_path == "bert_heads" else {}
        query = urlencode({**{key: to_url(value) for _, key, value in changes}, **extra})
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.goto(f"{server}/{spec.url_path}?{query}", wait_until="domcontentloaded")
        page.wait_for_selector("h1", timeout=DEADLINE_MS)
        wait_idle(page)
        assert page.locator('[data-testid="stException"]').count() == 0, spec.file
        for dropped in ("cannot be used", "is not available here"):  # no value was dropped
            assert page.get_by_text(dropped).count() == 0, (spec.file, dropped)
        kept = parse_qs(urlparse(page.url).query)
        for kind, key, value in changes:
            assert kept.get(key) == [to_url(value)], (spec.file, key, kept)  # the link stays the view's
            box = page.locator(f".st-key-{widget_key(key)}")
            if kind in ("toggle", "checkbox"):
                assert box.locator("input").is_checked() == value, (spec.file, key)
            elif kind in ("number_input", "text_input", "text_area"):
                assert box.locator("input, textarea").first.input_value() == str(value), (spec.file, key)
            elif kind in ("slider", "select_slider"):
                assert box.get_by_role("slider").get_attribute("aria-valuetext") in (str(value), f"{value:.2f}"), (
                    spec.file,
                    key,
                )
            else:  # a picker shows its value's label
                values = value if isinstance(value, list) else [value]
                labels = [str(v) if not isinstance(v, tuple) else f"head {v[1]}" for v in values]
                shown = _picker_text(page, box, labels)
                for label in labels:
                    assert label in shown or label.upper() in shown, (spec.file, key, label, shown)
        if extra:
            page.wait_for_selector("text=[CLS] and [SEP] hidden", timeout=DEADLINE_MS)
            assert "layer=2" in page.url and "head=3" in page.url
        context.close()


def test_a_fresh_visit_draws_the_heads_page_from_a_small_payload(server, browser):
    """The measurement of bench/bench_firstpaint.py, once: a new browser (nothing cached) on a warm
    server. What the app sends for a short sentence stays small; every chart is drawn."""
    import time
    from urllib.parse import quote

    url = f"{server}/bert_heads?text={quote('The mole on his arm was not a mole but a rare insect.')}"
    warm = browser.new_page()
    warm.goto(url)
    warm.wait_for_selector(".js-plotly-plot .main-svg", timeout=120_000)
    warm.close()
    page, frames = livetest.fresh_page(browser)
    t0 = time.perf_counter()
    page.goto(url, wait_until="commit")
    page.wait_for_selector("h1:has-text('Attention heads')", timeout=DEADLINE_MS)
    title = time.perf_counter() - t0
    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=DEADLINE_MS)
    first_chart = time.perf_counter() - t0
    page.mouse.wheel(0, 3000)  # charts below the fold are drawn when scrolled to
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot .main-svg').length >= 4", timeout=DEADLINE_MS)
    wait_idle(page)
    assert page.locator('[data-testid="stPlotlyChart"]').count() == 4
    payload = sum(frames) / 1e6
    assert payload < 0.2, f"{payload:.2f} MB sent for a 16-token sentence"  # 0.06 MB measured
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "first_paint.txt").write_text(
        f"title {title:.2f} s, first chart {first_chart:.2f} s, app payload {payload:.3f} MB\n"
    )
    page.context.close()


def test_the_decoder_picked_in_the_sidebar_runs_every_page(server, browser):
    """A learner picks the grouped-query decoder in the sidebar, types a sentence and visits every
    page: no traceback, and no text about BERT's special tokens or the bundled model's shape."""
    import re

    text = "The old sailor told the children a story about the sea."
    page, dialogs = open_and_type(browser, server, text)
    picker = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').filter(has_text="Model").first
    picker.locator("input").click()
    page.keyboard.type("SmolLM2")  # the box filters its options as one types
    page.keyboard.press("Enter")
    wait_idle(page)
    page.wait_for_selector('[data-testid="stSidebar"] :text("Llama-class decoder")', timeout=120_000)
    bert_words = re.compile(r"\[CLS\]|\[SEP\]|MiniLM|\b384\b|6 layers|12 heads|72 heads")
    for name in PAGES:
        go(page, name)
        page.wait_for_selector("h1", timeout=DEADLINE_MS)
        assert page.locator('[data-testid="stException"]').count() == 0, name
        shown = page.locator('[data-testid="stMain"]').evaluate(  # without the section on three named models
            "el => { const box = [...el.querySelectorAll('.st-key-three_models')]; box.forEach(n => n.hidden = true);"
            " const t = el.innerText; box.forEach(n => n.hidden = false); return t; }"
        )
        assert not bert_words.findall(shown), (name, bert_words.findall(shown))
        assert "SmolLM2" in page.url, name  # the link keeps the model
    go(page, "bert_heads")
    page.wait_for_selector('[data-testid="stPlotlyChart"] .main-svg', timeout=DEADLINE_MS)
    assert page.locator("h1", has_text="Attention heads").count() == 1
    assert "30 layers x 9 heads" in page.locator('[data-testid="stMain"]').inner_text()
    assert dialogs == []
    # the worst a student can send this replica: 10,000 characters on the decoder, on the pages that
    # raised the server's peak most (bench/bench_models_memory.py); its peak stays under the memory
    # limit every deployment gives a replica (deploy/compose.yaml, systemd, deploy/k8s)
    from urllib.parse import quote

    from livetest import memory_mb
    from mha.models.catalog import DECODER_MODEL, MAX_CHARS

    words = "the sailor who had crossed every sea said that no storm was worse than waiting ".split()
    long = " ".join(words[i % len(words)] + str(i % 97) for i in range(5000))[:MAX_CHARS]
    for name in ("collapse", "lesson", "bert_heads"):
        page.goto(f"{server}/{name}?model={quote(DECODER_MODEL)}&text={quote(long)}")
        page.wait_for_selector("h1", timeout=DEADLINE_MS)
        wait_idle(page)
        assert page.locator('[data-testid="stException"]').count() == 0, name
    limit = int(re.search(r"memory: (\d+)M", (ROOT / "deploy" / "compose.yaml").read_text()).group(1))
    peak = memory_mb(LIVE["pid"])[1]
    assert peak < limit, f"the replica peaked at {peak:,.0f} MiB, over its {limit:,} MiB limit"
    print(f"replica peak after 10,000 characters on {DECODER_MODEL}: {peak:,.0f} MiB (limit {limit:,} MiB)")
