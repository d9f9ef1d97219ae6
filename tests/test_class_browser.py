"""A class in real browsers: a teacher and 6 students on two replicas behind nginx sharing
PostgreSQL, and a teacher and 3 students on one server with its SQLite file.

The teacher starts a class; students join with its code; the histogram counts exactly their
first answers (a changed answer does not move it); the teacher's next step reaches every
student; a student who reloads, one who opens a new tab and (behind nginx) every student of a
replica that is killed keep their answer and score; a student's browser opening a forged
teacher link sees no class. `artifacts/class_flow.json` has the timings.
"""

from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import shutil
import time
import urllib.request
from urllib.parse import urlencode

import pytest
import sqlalchemy as sa
from conftest import chromium_or_skip
from test_browser import AXE, AXE_RUN
from test_sessions import replica_for

from livetest import CHROMIUM_FLAGS, DEADLINE_MS, ROOT, nginx_proxy, settle, streamlit_server
from mha.lesson import steps

N = len(steps.STEPS)  # the lesson's step count, as the lesson has it

N_STUDENTS = 6
SENTENCE = "Seven tired owls watched the quiet river until the owls slept."
PG_URL = os.environ.get("MHA_TEST_PG", "postgresql+psycopg://mha:mha@127.0.0.1:5432/mha_test")
ARTIFACTS = ROOT / "artifacts"
READ_BARS = """() => {
  for (const el of document.querySelectorAll('.js-plotly-plot')) {
    const t = (el.layout && el.layout.title && el.layout.title.text) || '';
    if (t.includes('answered')) return {y: Array.from(el.data[0].y), x: Array.from(el.layout.xaxis.ticktext)};
  }
  return null;
}"""


FIRST_SCREEN = """() => {
  const bottom = (el) => el ? el.getBoundingClientRect().bottom : 1e9;
  const button = [...document.querySelectorAll('button')].find(b => b.innerText.includes('Everyone to the next step'));
  const chart = [...document.querySelectorAll('.js-plotly-plot')].find(el => /answered/.test(el.layout.title.text));
  const body = document.querySelector('[data-testid="stMarkdownContainer"] p');
  return {
    bottoms: {code: bottom(document.querySelector('h1')), next: bottom(button), histogram: bottom(chart)},
    sentence_px: parseFloat(getComputedStyle(document.querySelector('p.mha-pinned')).fontSize),
    body_px: parseFloat(getComputedStyle(body).fontSize),
    ticks: chart ? [...chart.querySelectorAll('.xtick text')].map(t => t.textContent) : [],
  };
}"""


def require(tool: str, why: str) -> None:
    if shutil.which(tool) is None:
        pytest.fail(why) if os.environ.get("CI", "").lower() == "true" else pytest.skip(why)


def postgres_or_skip() -> str:
    """The test database (MHA_TEST_PG; .ci/run starts Debian's PostgreSQL and makes it), emptied."""
    engine = sa.create_engine(PG_URL)
    try:
        with engine.begin() as conn:
            for table in ("answers", "seats", "failures", "classes", "alembic_version"):
                conn.execute(sa.text(f"DROP TABLE IF EXISTS {table} CASCADE"))  # a fixed list: no user input
    except sa.exc.OperationalError as e:
        why = f"PostgreSQL is not reachable at {PG_URL} ({type(e).__name__}): .ci/run starts it"
        pytest.fail(why) if os.environ.get("CI", "").lower() == "true" else pytest.skip(why)
    finally:
        engine.dispose()
    return PG_URL


async def wait_text(page, text: str, timeout: float = DEADLINE_MS) -> float:
    t0 = time.perf_counter()
    await page.wait_for_selector(f"text={text}", timeout=timeout)
    return time.perf_counter() - t0


async def pin_next(teacher) -> None:
    """The teacher moves everyone to the next step: clicked once the teacher's page is idle (a click
    during its histogram's rerun is not a click it has drawn), and done once that run is over."""
    await settle(teacher)
    await teacher.get_by_role("button", name="Everyone to the next step →").click()
    await settle(teacher)


async def score(page) -> str:
    """The lesson's score box: "<right> of <answered>"."""
    box = page.locator('[data-testid="stMetricValue"]').first
    await box.wait_for(timeout=DEADLINE_MS)
    return (await box.inner_text()).strip()


async def bars(page, want_total: int, timeout: float = DEADLINE_MS / 1000) -> dict[str, int]:
    """The teacher's histogram (label -> students), once it counts `want_total` answers (the deadline
    of every wait here: a busy 2-core machine, not a quiet one)."""
    deadline = time.perf_counter() + timeout
    while True:
        got = await page.evaluate(READ_BARS)
        if got and sum(got["y"]) == want_total:
            return {x.replace("<br>", " ").removesuffix(" (right)"): int(y) for x, y in zip(got["x"], got["y"])}
        if time.perf_counter() > deadline:
            raise AssertionError(f"the histogram shows {got}, not {want_total} answers")
        await page.wait_for_timeout(300)


async def student(browser, url: str, code: str, n: int, key: str | None = None) -> dict:
    context = await browser.new_context(viewport={"width": 1300, "height": 900})
    context.set_default_timeout(DEADLINE_MS)  # every wait is for the app, with a busy machine's deadline
    if key:  # the sticky cookie nginx would have given: this student's replica
        await context.add_cookies([{"name": "mha_replica", "value": key, "url": url}])
    page = await context.new_page()
    response = await page.goto(f"{url}/classroom?join={code}")
    await settle(page)  # the app's first run done: its form is drawn
    await page.get_by_role("textbox", name="Nickname (optional)").fill(f"Pupil {n}")
    await page.get_by_role("button", name="Join").click()
    await wait_text(page, f"Step 1 of {N}")
    await settle(page)
    box = page.locator('[data-testid="stSidebar"] textarea').first  # the class's sentence, in the sidebar too:
    assert await box.input_value() == SENTENCE  # the student's next click must not send another one back
    return {"n": n, "context": context, "page": page, "replica": response.headers.get("x-mha-replica", "")}


async def answer(s: dict, option: int) -> str:
    """Pick option `option` of the step's question; the option's text."""
    radio = s["page"].locator('[data-testid="stRadio"]').first
    labels = radio.locator('[role="radiogroup"] label')
    await labels.first.wait_for(timeout=DEADLINE_MS)
    text = (await labels.nth(option).inner_text()).strip()
    await labels.nth(option).click()
    await settle(s["page"])
    await s["page"].get_by_text(re.compile(r"^(Right\.|Not quite)")).first.wait_for(timeout=DEADLINE_MS)
    return text


async def class_flow(
    exe: str,
    url: str,
    kill=None,
    keys: list[str] | None = None,
    n_students: int = N_STUDENTS,
    lab_db: str = "",
    lose: int = 1,
) -> dict:
    """The whole flow through `url` with `n_students` students; `kill(replicas)` kills `lose`
    replicas at once (behind nginx: a node lost) or is None. `keys`: sticky cookies, the
    teacher's first, then one per student (behind nginx). `lab_db`: the class's database, where
    the shared lab PC is tried (lab_pc)."""
    from playwright.async_api import async_playwright

    figures: dict = {}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)
        tctx = await browser.new_context(viewport={"width": 1280, "height": 720})
        tctx.set_default_timeout(DEADLINE_MS)
        if keys:
            await tctx.add_cookies([{"name": "mha_replica", "value": keys[0], "url": url}])
        teacher = await tctx.new_page()
        opened = await teacher.goto(f"{url}/classroom?{urlencode({'text': SENTENCE})}")  # not the default sentence
        teacher_replica = opened.headers.get("x-mha-replica", "")
        await teacher.get_by_role("button", name="Start a class").click()
        heading = teacher.locator("h1", has_text=re.compile(r"^Class \w{4} \w{4}$"))
        await heading.wait_for(timeout=DEADLINE_MS)
        code = (await heading.inner_text()).split(" ", 1)[1].replace(" ", "").strip()
        assert len(code) == 8, code
        assert await teacher.locator('[data-testid="stSidebar"]').is_hidden()  # the projector: no sidebar
        for _ in range(40):  # the address bar shows teach=1, never the teacher's secret
            if "teach=1" in teacher.url:
                break
            await teacher.wait_for_timeout(250)
        assert "teach=1" in teacher.url and "teacher=" not in teacher.url, teacher.url
        await teacher.reload()  # the teacher's browser keeps the class (a cookie)
        await heading.wait_for(timeout=DEADLINE_MS)
        t0 = time.perf_counter()
        picks = keys[1:] if keys else [None] * n_students
        students = await asyncio.gather(*(student(browser, url, code, n, k) for n, k in enumerate(picks)))
        figures[f"{len(students)} students joined and at step 1, s"] = round(time.perf_counter() - t0, 1)
        # first answers: student n picks option n % 3; students 0 and 1 then change their minds
        first = [await answer(s, s["n"] % 3) for s in students]
        first_answers = list(first)
        changed = [await answer(s, 3) for s in students[:2]]
        expected = {label: first.count(label) for label in set(first)}
        got = await bars(teacher, len(students))
        assert {k: v for k, v in got.items() if v} == expected, (got, first)
        await wait_text(teacher, f"{len(students)} of {len(students)} answered")
        # the projector at 1280 x 720, scrolled to the top: code, the next step's button, the counts and the
        # whole histogram on the first screen; the sentence no smaller than the body; every bar labelled
        await teacher.evaluate("window.scrollTo(0, 0)")
        first = await teacher.evaluate(FIRST_SCREEN)
        assert max(first["bottoms"].values()) <= 720, first
        assert first["sentence_px"] >= first["body_px"] and first["sentence_px"] >= 24, first
        assert all(t.strip() for t in first["ticks"]) and len(first["ticks"]) >= 2, first
        if kill is None and AXE.exists():  # the projector view: WCAG 2 A/AA, no serious or critical finding
            await teacher.add_script_tag(path=str(AXE))
            found = await teacher.evaluate(AXE_RUN)
            bad = [v for v in found if v["impact"] in ("serious", "critical")]
            texts = [
                await teacher.evaluate("(s) => document.querySelector(s)?.innerText", n)
                for v in bad
                for n in v["nodes"]
            ]
            assert not bad, (bad, texts)
        for s in students:  # every answer was on the class's sentence
            assert "owls" in (await s["page"].locator('[data-testid="stSidebar"] textarea').first.input_value())
        scores = [await score(s["page"]) for s in students]
        assert all(sc.endswith("of 1") for sc in scores), scores
        # a student may move on alone: the page stays where they went (the class's pin is unchanged)
        alone = students[-1]["page"]
        await alone.get_by_role("button", name="Next →").click()
        await wait_text(alone, f"Step 2 of {N}")
        await alone.wait_for_timeout(2500)  # longer than a check of the class's pin
        assert await alone.locator(f"text=Step 2 of {N}").count() == 1
        # the teacher moves everyone to step 2: every student's page follows on its own
        t0 = time.perf_counter()
        await pin_next(teacher)
        await asyncio.gather(*(wait_text(s["page"], f"Step 2 of {N}", DEADLINE_MS) for s in students))
        figures["pinned step on every student's page, s after the click"] = round(time.perf_counter() - t0, 1)
        # a reload and a new tab keep the answer and the score
        s0 = students[0]
        await s0["page"].reload()
        await wait_text(s0["page"], f"Step 2 of {N}")
        assert await score(s0["page"]) == scores[0]
        tab = await s0["context"].new_page()
        await tab.goto(f"{url}/")
        await wait_text(tab, f"Step 2 of {N}")  # a tab opened on the app's address: the class's step
        assert await score(tab) == scores[0]
        await tab.get_by_role("button", name="← Back").click()
        await settle(tab)
        radio = tab.locator('[data-testid="stRadio"]').first
        checked = (await radio.locator("label:has(input:checked)").inner_text()).strip()
        assert checked == changed[0], (checked, changed[0])  # step 1 shows the answer last given; the score the first
        await tab.close()
        if kill is not None:  # a node is lost: half the replicas at once (kill -9); their students' pages
            # reconnect to the others and keep their seats and answers. Not the teacher's replica: the
            # teacher's own click, sent while its page reconnects, would be lost (a teacher clicks again)
            doomed = sorted({s["replica"] for s in students} - {teacher_replica})[:lose]
            moved = [s for s in students if s["replica"] in doomed]
            killed = time.perf_counter()
            kill(doomed)
            await pin_next(teacher)
            await asyncio.gather(*(wait_text(s["page"], f"Step 3 of {N}", DEADLINE_MS) for s in students))
            t = round(time.perf_counter() - killed, 1)
            figures["every student at the next pin after half the replicas were killed, s"] = t
            figures["students on the killed replicas"] = len(moved)
            assert len(doomed) == lose and len(moved) >= 2 and teacher_replica not in doomed, (doomed, teacher_replica)
            for s in moved:  # a new session on a survivor: the answers came back from the database
                assert await score(s["page"]) == scores[s["n"]], s["n"]
            third = await asyncio.gather(*(answer(s, s["n"] % 2) for s in students))  # everyone answers again
            figures["every student answered again after the replicas were killed, s"] = round(
                time.perf_counter() - killed, 1
            )
            got = await bars(teacher, len(students))
            assert {k: v for k, v in got.items() if v} == {x: third.count(x) for x in set(third)}, (got, third)
            async with teacher.expect_download() as download:  # the CSV: every first answer, exactly
                await teacher.get_by_role("button", name="Download every answer (CSV)").click()
            rows = list(csv.DictReader(open(await (await download.value).path(), encoding="utf-8")))
            by_step = {(r["nickname"], r["step"]): r for r in rows}
            assert len(rows) == len(by_step) == 2 * len(students), rows
            for s, a1, a3 in zip(students, first_answers, third):
                assert by_step[(f"Pupil {s['n']}", "1")]["first answer"] == a1
                assert by_step[(f"Pupil {s['n']}", "3")]["first answer"] == a3
            for s, now in zip(students[:2], changed):
                assert by_step[(f"Pupil {s['n']}", "1")]["answer now"] == now
        if lab_db:
            await lab_pc(students[0], url, code, scores[0], lab_db)
        # a student's browser cannot open the teacher view with a forged link or key
        outsider = await browser.new_context(viewport={"width": 1300, "height": 900})
        outsider.set_default_timeout(DEADLINE_MS)
        forged = await outsider.new_page()
        await forged.goto(f"{url}/classroom?teacher=not-the-teachers-token")
        await wait_text(forged, "Teacher links are not used any more")
        await forged.get_by_text("Open a class you teach").click()
        await forged.get_by_role("textbox", name="Teacher key").fill("not-the-teachers-token")
        await forged.get_by_role("button", name="Open the teacher view").click()
        await wait_text(forged, "This teacher key opens no class")
        assert await forged.locator("text=answered").count() == 0
        assert await teacher.locator('[data-testid="stException"]').count() == 0
        for s in students:
            assert await s["page"].locator('[data-testid="stException"]').count() == 0
        # the teacher ends the class: one box, one button
        await teacher.get_by_role("button", name="End the class").first.click()
        await teacher.get_by_role("button", name="End the class and delete its data").click()
        await wait_text(teacher, "The class has ended")
        await wait_text(students[0]["page"], "Your class has ended", DEADLINE_MS)
        await browser.close()
    return figures


async def lab_pc(s: dict, url: str, code: str, score_before: str, db_url: str) -> None:
    """The shared lab PC: student `s` leaves the class; the next student joins on the same browser
    with their own nickname and gets a seat of their own (no answer, no score, no name of the
    last one's); their answer is recorded under their name, the last one's are kept."""
    import sqlalchemy as sa

    from classroom import db

    page = await s["context"].new_page()
    await page.goto(f"{url}/classroom")
    await page.get_by_role("button", name="Leave the class").click()
    await wait_text(page, "You left the class")
    assert not [c for c in await s["context"].cookies() if c["name"] == "mha_seat" and c["value"]]
    await page.goto(f"{url}/classroom?join={code}")
    await page.get_by_role("textbox", name="Nickname (optional)").fill("Bruno Lab")
    await page.get_by_role("button", name="Join").click()
    await wait_text(page, "you are Bruno Lab")
    assert await page.locator(f"text=you are Pupil {s['n']}").count() == 0
    while await page.locator(f"text=Step 1 of {N}").count() == 0:  # back to the question the last one answered
        await page.get_by_role("button", name="← Back").click()
        await settle(page)
    radio = page.locator('[data-testid="stRadio"]').first
    await radio.wait_for(timeout=DEADLINE_MS)
    assert await radio.locator("label:has(input:checked)").count() == 0  # nothing of the last one's answer
    b = {"n": "Bruno", "page": page}
    await answer(b, 1)
    assert (await score(page)).endswith("of 1")  # one answer: Bruno's own, not Pupil's too
    with sa.create_engine(db_url).connect() as conn:
        rows = conn.execute(
            sa.select(db.seats.c.nickname, sa.func.count(db.answers.c.id))
            .join(db.classes, db.classes.c.id == db.seats.c.class_id)
            .outerjoin(db.answers, db.answers.c.seat_id == db.seats.c.id)
            .where(db.classes.c.code == code.upper())
            .group_by(db.seats.c.nickname)
        ).all()
    counts = dict(rows)
    assert counts["Bruno Lab"] == 1 and counts[f"Pupil {s['n']}"] >= 1, counts
    await page.close()


def save(name: str, figures: dict) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / "class_flow.json"
    kept = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps(kept | {name: figures}, indent=1))


def test_a_class_on_one_server_with_sqlite(tmp_path):
    exe = chromium_or_skip()
    db_url = f"sqlite:///{tmp_path / 'classes.sqlite'}"
    with streamlit_server({"MHA_CLASS_DB": db_url, "MHA_WARM": "0"}) as server:
        figures = asyncio.run(
            class_flow(exe, server.url, n_students=3, lab_db=db_url)
        )  # the flow of 6 runs behind nginx
        assert "Traceback" not in server.log.read_text()
    assert (tmp_path / "classes.sqlite").exists()
    save("one server, SQLite", figures)


def test_a_class_loses_half_of_four_replicas_behind_nginx_with_postgresql():
    """The school recipe on 4 replicas with PostgreSQL: the class loses two replicas at once
    (kill -9, a node lost). Every student reaches the next pin, the moved ones with their scores,
    everyone answers again, and the teacher's histogram and CSV are exact; the times are saved."""
    import contextlib

    exe = chromium_or_skip()
    require("nginx", "Debian's nginx is not installed: apt-get install -y nginx (.ci/run does)")
    url = postgres_or_skip()
    env = {"MHA_CLASS_DB": url, "MHA_WARM": "0"}
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(streamlit_server(env, timeout=180)) for _ in range(4)]
        replicas = {s.url.removeprefix("http://"): s for s in servers}
        with nginx_proxy(list(replicas)) as proxy:

            def kill(addresses: list[str]) -> None:
                for address in addresses:  # at once: every one is signalled before any is waited for
                    replicas[address].process.kill()
                for address in addresses:
                    replicas[address].process.wait()

            for r in replicas:  # every replica up before the first visitor
                urllib.request.urlopen(f"http://{r}/_stcore/health", timeout=10).read()
            # sticky cookies as nginx hands them out: the teacher on the first replica, the students
            # spread over all four in turn
            by: dict[str, list[str]] = {}
            for n in range(400):
                by.setdefault(replica_for(proxy.url, f"key{n}"), []).append(f"key{n}")
            pools = [list(by[r]) for r in replicas]
            keys = [pools[0].pop(0), *(pools[i % 4].pop(0) for i in range(N_STUDENTS))]
            t0 = time.perf_counter()
            figures = asyncio.run(class_flow(exe, proxy.url, kill, keys, lose=2))
            figures["the whole flow, s"] = round(time.perf_counter() - t0, 1)
        for server in replicas.values():
            assert "Traceback" not in server.log.read_text()
    save("half of four replicas lost behind nginx, PostgreSQL", figures)
