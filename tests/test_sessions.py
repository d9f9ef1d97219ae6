"""Eight browser sessions at once against one real server: each sees exactly its own results,
and the server loads the model once (its first visitor is told it is loading)."""

from __future__ import annotations

import asyncio

import numpy as np
from conftest import chromium_or_skip

import livetest
from livetest import CHROMIUM_FLAGS, streamlit_server
from mha import collapse
from ui.pages import PAGES

N_SESSIONS = 8
COLLAPSE = [p.url_path for p in PAGES].index("collapse")  # its place in the sidebar
WORDS = ["river", "violin", "planet", "garden", "engine", "castle", "forest", "rocket"]

READ_HEATMAP = """(title) => {
  for (const el of document.querySelectorAll('.js-plotly-plot')) {
    const t = (el.layout && el.layout.title && el.layout.title.text) || '';
    if (t.includes(title)) {  // Streamlit wraps titles in <b>
      const z = el._fullData[0].z;
      return Array.from(z, row => Array.from(row));
    }
  }
  return null;
}"""


def session_text(i: int) -> str:
    return f"The {WORDS[i]} near the {WORDS[(i + 3) % 8]} was {i + 2} times older than the {WORDS[i]}."


async def settle(page) -> None:
    """Wait for the run the last action started to finish, and for the page to draw."""
    await livetest.settle(page)
    await page.wait_for_timeout(300)


async def read(page, title: str):
    for _ in range(60):  # charts draw a moment after the run ends
        z = await page.evaluate(READ_HEATMAP, title)
        if z is not None:
            return np.array(z, dtype=np.float64)
        await page.mouse.wheel(0, 800)
        await page.wait_for_timeout(250)
    raise AssertionError(f"no chart titled {title!r}")


async def one_session(browser, url: str, i: int) -> dict:
    text, layer, head, shared = session_text(i), i % 6, i % 12, i % 2 == 1
    context = await browser.new_context(viewport={"width": 1300, "height": 900})
    page = await context.new_page()
    from urllib.parse import urlencode

    await page.goto(f"{url}/bert_heads?" + urlencode({"text": text, "layer": layer, "head": head}))
    await settle(page)
    out = {"i": i, "text": text, "layer": layer, "head": head, "shared": shared}
    out["head_map"] = await read(page, f"Layer {layer}, head {head}")
    await page.locator('[data-testid="stSidebarNav"] a').nth(COLLAPSE).click()
    await settle(page)
    if shared:
        await page.get_by_test_id("stCheckbox").get_by_text("Shared (alpha = 1)").click()
    # the grid's title names alpha: wait for this session's setting to be drawn, then the run's end
    await read(page, f"Layer {layer} at alpha = {1.0 if shared else 0.5:.2f}")
    await settle(page)
    out["diversity"] = await read(page, "Head diversity")
    out["sidebar"] = await page.locator('[data-testid="stSidebar"] textarea').first.input_value()
    out["errors"] = await page.locator('[data-testid="stException"]').count()
    await context.close()
    return out


async def all_sessions(exe: str, url: str) -> list[dict]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)
        # the server is fresh: the first visitor sees what it is waiting for, not a blank area
        first = await browser.new_page(viewport={"width": 1200, "height": 900})
        await first.goto(url, wait_until="domcontentloaded")
        await first.wait_for_selector("text=Loading all-MiniLM-L6-v2", timeout=30_000)
        await first.wait_for_selector("text=Step 1 of 8", timeout=90_000)
        assert await first.locator('[data-testid="stException"]').count() == 0
        await first.close()
        results = await asyncio.gather(*(one_session(browser, url, i) for i in range(N_SESSIONS)))
        await browser.close()
    return results


def test_eight_concurrent_sessions_see_only_their_own_results(bert):
    exe = chromium_or_skip()
    with streamlit_server() as live:
        results = asyncio.run(all_sessions(exe, live.url))
        loads = [line for line in live.log.read_text().splitlines() if line.startswith("mha: loaded")]
    assert len(loads) == 1, loads  # one model for every session
    for r in results:
        assert r["errors"] == 0, r["i"]
        assert r["sidebar"] == r["text"]
        run = bert.attend(r["text"])
        np.testing.assert_allclose(r["head_map"], run.attentions[r["layer"], r["head"]], atol=1e-5)
        expect = collapse.collapse_layer(bert, run, r["layer"], collapse.CollapsePath(1.0 if r["shared"] else 0.5))
        np.testing.assert_allclose(r["diversity"], expect.diversity, atol=1e-5)
        assert (np.abs(r["diversity"]).max() < 1e-9) == r["shared"]
