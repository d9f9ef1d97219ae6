"""Class mode attacked from inside the room, against a real server, with a raw client
(livetest.raw) that sends what a browser would not: any header, any cookie, any widget value.

Each test is one of issue 49's attacks: a forged X-Forwarded-For, an address locked out by a
classmate's wrong codes, a script that guesses codes fast, one browser taking many seats, a
class flooded with seats (the teacher removes one).
"""

from __future__ import annotations

import re
import time

import pytest
import sqlalchemy as sa

from classroom import classes, db, limits
from livetest import raw, streamlit_server
from mha.models.catalog import DEFAULT_MODEL

TEXT = "Four quiet foxes crossed the frozen lake at dawn."
CAP = 4


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('attack') / 'classes.sqlite'}"
    env = {"MHA_CLASS_DB": url, "MHA_WARM": "0", "MHA_CLASS_SEATS": str(CAP), "FORWARDED_ALLOW_IPS": "192.0.2.1"}
    with streamlit_server(env) as s:
        s.db = url
        yield s
    db.dispose()


def failures_of(url: str) -> dict[str, int]:
    with db.engine(url).connect() as conn:
        rows = conn.execute(sa.select(db.failures.c.address, sa.func.count()).group_by(db.failures.c.address))
        return dict(rows.all())


def nicknames(url: str, teacher: str) -> tuple[str, ...]:
    return classes.teacher_class(teacher, url=url).nicknames


def join(s: raw.Session, code: str, nickname: str = "") -> float:
    """Type `code` and `nickname` on the Class page and press Join: the seconds it took."""
    if "Class code" not in s.widgets:
        s.run("classroom")
    s.set("Class code", code)
    s.set("Nickname (optional)", nickname)
    t0 = time.perf_counter()
    s.click("Join")
    assert not s.exceptions(), s.exceptions()
    return time.perf_counter() - t0


def seat_cookie(s: raw.Session) -> str:
    """The seat token the page's script would store in the browser's cookie."""
    for text in s.texts():
        found = re.search(r"mha_seat=([\w.-]+);", text)
        if found:
            return found.group(1)
    raise AssertionError("no seat cookie was set")


def test_a_forged_forwarded_address_is_not_believed(server):
    """A student on the LAN sends X-Forwarded-For: a classmate's address. The server's peer here
    (127.0.0.1) is not the proxy named (FORWARDED_ALLOW_IPS, like a student's machine on the
    LAN): the wrong code counts against the peer's address, not the classmate's. (The old
    code believed the header from any loopback or private peer.)"""
    before = failures_of(server.db)
    with raw.Session(server.url, headers={"X-Forwarded-For": "10.9.9.9"}) as s:
        join(s, "ZZZZZZZZ")
        assert any("No class has that code" in t for t in s.texts())
    after = failures_of(server.db)
    assert after.get("10.9.9.9", 0) == 0
    assert after.get("local", 0) == before.get("local", 0) + 1, after  # st.context's name for the loopback peer


def test_a_classmates_wrong_codes_never_refuse_a_right_one(server):
    code, teacher = classes.start_class(DEFAULT_MODEL, TEXT, url=server.db)
    with db.engine(server.db).begin() as conn:  # a classmate behind the same address typed 3 x 60 wrong codes
        conn.execute(db.failures.insert(), [{"address": "local", "at": time.time()}] * 3 * limits.MAX_FAILURES)
    with raw.Session(server.url) as s:
        took = join(s, code, "Rightful")
        assert "Rightful" in nicknames(server.db, teacher), s.texts()
    assert took >= limits.FLAGGED_WAIT
    with db.engine(server.db).begin() as conn:
        conn.execute(db.failures.delete())


def test_a_session_that_guesses_waits_longer_each_time(server):
    with raw.Session(server.url) as s:
        took = [join(s, f"ZZZZ{n:04d}") for n in range(limits.FREE_TRIES + 2)]
        assert all("No class has that code" in " ".join(s.texts()) for _ in took)
    quickest = min(took[: limits.FREE_TRIES])  # a join without a wait (a busy machine slows some more)
    assert took[-2] >= quickest + limits.session_wait(limits.FREE_TRIES) * 0.9, took
    assert took[-1] >= quickest + limits.session_wait(limits.FREE_TRIES + 1) * 0.9, took
    with db.engine(server.db).begin() as conn:
        conn.execute(db.failures.delete())


def test_one_seat_per_browser_a_cap_per_class_and_the_teacher_removes_one(server):
    code, teacher = classes.start_class(DEFAULT_MODEL, TEXT, url=server.db)
    with raw.Session(server.url) as s:
        join(s, code, "Carol")
        token = seat_cookie(s)
        s.run("classroom")
        s.click("Leave the class")
        assert "mha_seat=; Path=/; Max-Age=0;" in " ".join(s.texts())  # the browser keeps nothing of the seat
    with raw.Session(server.url) as s:  # the next student on that lab PC: a seat of their own
        join(s, code, "Dave")
        assert seat_cookie(s) != token and any(t.endswith("you are Dave") for t in s.texts()), s.texts()
    with raw.Session(server.url, cookies={"mha_seat": f"left.{token}"}) as s:  # what an older version left
        join(s, code, "Erin")
        assert seat_cookie(s) != token and any(t.endswith("you are Erin") for t in s.texts()), s.texts()
    with raw.Session(server.url, cookies={"mha_seat": token}) as s:  # had Carol not left: her seat, and the way out
        s.run("classroom")
        assert any(t.startswith("Not Carol? Leave the class") for t in s.texts()), s.texts()
        s.click("Leave the class")
        join(s, code, "Fay")
        assert seat_cookie(s) != token and any(t.endswith("you are Fay") for t in s.texts()), s.texts()
    assert nicknames(server.db, teacher) == ("Carol", "Dave", "Erin", "Fay")  # CAP seats
    with raw.Session(server.url) as s:  # a script without cookies: a new session, but the class is full
        join(s, code, "Bot")
        assert f"This class is full ({CAP} seats)" in " ".join(s.texts())
    with raw.Session(server.url, cookies={"mha_teacher": teacher}) as t:  # the teacher's view removes one
        t.run("classroom", query="teach=1")
        t.set("Remove a seat (and its answers)", "Erin", "string_value")  # what the browser sends
        t.rerun()
        t.click("Remove Erin")
        assert not t.exceptions()
    assert nicknames(server.db, teacher) == ("Carol", "Dave", "Fay")


def test_a_huge_message_is_refused_before_it_costs_memory(server):
    """A 24 MB nickname (Streamlit's default limit is 25 MB per message) closes the WebSocket with
    1009 (message too big) and costs the server no more than the frame itself."""
    from livetest import memory_mb

    code, teacher = classes.start_class(DEFAULT_MODEL, TEXT, url=server.db)
    with raw.Session(server.url) as s:
        s.run("classroom")
        before = memory_mb(server.process.pid)[0]
        s.set("Class code", code)
        s.set("Nickname (optional)", "A" * 24_000_000)
        s.click("Join", timeout=30)
        assert s.closed_with == 1009, s.closed_with
    grown = memory_mb(server.process.pid)[0] - before
    assert grown < 150, grown
    assert nicknames(server.db, teacher) == ()
    with raw.Session(server.url) as s:  # the largest a page needs still passes: two sentences of MAX_CHARS
        s.run("classroom")
        s.set("Sentence", "Many words. " * 800)
        s.set("Second sentence (optional)", "é" * 9_000)
        s.rerun()
        assert s.closed_with is None and not s.exceptions()


def test_forged_widget_values_and_a_clear_cache_message_are_harmless(server):
    """What a browser never sends: infinity to a number box, an integer to a box of strings, an
    index past a radio's options, a string to a radio, a clear_cache message (which, in
    Streamlit, clears every cache for every session: the shared model would load again)."""
    import math

    from streamlit.proto.BackMsg_pb2 import BackMsg

    with raw.Session(server.url) as s:
        s.run("why_heads")
        for label, value, kind in [("Seed", math.inf, None), ("Seed", -math.inf, None), ("Model", 5, "int_value")]:
            s.set(label, value, kind)
            s.rerun()
            assert not s.exceptions(), (label, value, s.exceptions())
        loads = server.log.read_text().count("mha: loaded")
        msg = BackMsg()
        msg.clear_cache = True
        s.send(msg)
        s.run("bert_heads")
        assert not s.exceptions()
    with raw.Session(server.url) as s:
        s.run("lesson")
        (radio,) = [k for k, w in s.widgets.items() if w.kind == "radio"]
        for value, kind in [(99, "int_value"), (-1, "int_value"), ("no such option", "string_value")]:
            s.set(radio, value, kind)
            s.rerun()
            assert not s.exceptions(), (value, s.exceptions())
    assert server.log.read_text().count("mha: loaded") == loads  # the model stayed loaded
    assert "Traceback" not in server.log.read_text()


def test_the_pinned_histogram_counts_only_the_pinned_question(server):
    """A first answer stored with another question's options (what a tag collision or a forged
    row gives) does not replace the class's options or right answer, nor count."""
    import json

    code, teacher = classes.start_class(DEFAULT_MODEL, TEXT, url=server.db)
    with raw.Session(server.url) as s:
        join(s, code, "Honest")  # lands on the pinned step 1
        (radio,) = [k for k, w in s.widgets.items() if w.kind == "radio"]
        options = s.widgets[radio].options
        s.set(radio, options[1], "string_value")  # what a browser sends: the option as shown
        s.rerun()
        assert not s.exceptions()
    with db.engine(server.db).begin() as conn:  # a seat whose first answer came with other options
        a = db.answers.c
        class_id, qid, record = conn.execute(sa.select(a.class_id, a.qid, a.record)).one()
        forger = dict(class_id=class_id, token_hash="f" * 64, nickname="Forger", nickname_key="f", joined=0)
        seat = conn.execute(db.seats.insert().values(**forger)).inserted_primary_key[0]
        conn.execute(
            db.answers.insert().values(
                class_id=class_id,
                seat_id=seat,
                qid=qid,
                record=record,
                keys=f"q_{qid}",
                value="0",
                label="None",
                options=json.dumps(["None", "All"]),
                right=True,
                at=0.0,
                expected=json.dumps(["None"]),
            )
        )
    with raw.Session(server.url, cookies={"mha_teacher": teacher}) as t:
        t.run("classroom", query="teach=1")
        charts = [json.loads(p.spec) for k, p in t.elements if k == "plotly_chart"]
        assert len(charts) == 1, t.texts()
        shown = [x.replace("<br>", " ").removesuffix(" (right)") for x in charts[0]["layout"]["xaxis"]["ticktext"]]
        assert shown == options, (shown, options)
        assert sum(charts[0]["data"][0]["y"]) == 1
        assert charts[0]["layout"]["title"]["text"].startswith("1 of 2 answered"), charts[0]["layout"]["title"]


def test_an_expired_class_is_deleted_on_schedule_and_leaves_no_trace(tmp_path):
    """A class past its 24 hours is deleted by the server's own schedule (no other class needs to
    start), with its seats, answers and old failed attempts, and neither the SQLite file nor its
    write-ahead log keeps the sentence or a nickname."""
    url = f"sqlite:///{tmp_path / 'classes.sqlite'}"
    secret = "Nightingale quartz vanished"
    code, teacher = classes.start_class(DEFAULT_MODEL, secret, url=url)
    seat = classes.join(code, "Zebulon", url=url)
    qid = "one-query:0badf00d0badf00d-spread"
    classes.record_answer(seat.token, qid, [f"q_{qid}"], 1, ["a", "b"], False, url=url)
    with db.engine(url).begin() as conn:
        conn.execute(db.classes.update().values(created=time.time() - classes.EXPIRES - 5))
        conn.execute(db.failures.insert().values(address="203.0.113.9", at=time.time() - limits.WINDOW - 5))
    db.dispose()
    with streamlit_server({"MHA_CLASS_DB": url, "MHA_WARM": "0", "MHA_CLASS_PURGE_EVERY": "1"}) as server:
        with raw.Session(server.url) as s:  # a first visitor starts the server's schedule
            s.run("overview")
        deadline = time.time() + 20
        while time.time() < deadline:
            with db.engine(url).connect() as conn:
                left = [
                    conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one()
                    for t in (db.classes, db.seats, db.answers, db.failures)
                ]
            if left == [0, 0, 0, 0]:
                break
            time.sleep(0.5)
        assert left == [0, 0, 0, 0], left
        time.sleep(1.5)  # the purge's checkpoint follows its delete
        files = [p for p in tmp_path.iterdir() if p.name.startswith("classes.sqlite")]
        for f in files:
            data = f.read_bytes()
            assert secret.encode() not in data and b"Zebulon" not in data, f.name
    db.dispose()


def test_the_teachers_key_is_in_no_log_and_its_cookie_ends_with_the_class(server):
    """Through nginx: an old `?teacher=<key>` link opens nothing and neither log holds the key;
    the key typed into the Class page opens the view; the cookie it sets lasts as long as the
    class has left (not 24 h); leaving the view deletes it."""
    import shutil
    import urllib.request

    from livetest import nginx_proxy

    if shutil.which("nginx") is None:
        pytest.skip("nginx is not installed")
    code, teacher = classes.start_class(DEFAULT_MODEL, TEXT, url=server.db)
    with db.engine(server.db).begin() as conn:  # the class started 20 hours ago: 4 hours left
        conn.execute(db.classes.update().where(db.classes.c.code == code).values(created=time.time() - 20 * 3600))
    with nginx_proxy([server.url.removeprefix("http://")]) as proxy:
        urllib.request.urlopen(f"{proxy.url}/classroom?teacher={teacher}", timeout=10).read()
        with raw.Session(proxy.url) as s:
            s.run("classroom", query=f"teacher={teacher}")
            assert any("Teacher links are not used any more" in t for t in s.texts())
            assert not any(k == "plotly_chart" for k, _ in s.elements) and "teacher=" not in s.query
            s.widgets.clear()
            s.run("classroom")
            s.set("Teacher key", teacher)
            s.click("Open the teacher view")
            said = " ".join(s.texts())
            assert f"Class {code[:4]} {code[4:]}" in said, said[-2000:]
            age = re.search(r"mha_teacher=[\w-]+; Path=/; Max-Age=(\d+);", said)
            assert age and 4 * 3600 - 120 <= int(age.group(1)) <= 4 * 3600, age
            s.click("Leave the teacher view")
            said = " ".join(s.texts())
            assert "mha_teacher=; Path=/; Max-Age=0;" in said and "You left the teacher view" in said
            assert "teach=1" not in s.query
        time.sleep(1)  # nginx writes a WebSocket's line when it closes
        logs = "".join(p.read_text() for p in proxy.logs.glob("*.log"))
    assert "/classroom" in logs and teacher not in logs


def test_the_server_never_sends_a_reference_to_a_message_the_browser_may_have_dropped(server):
    """The browser keeps large messages for 2 script runs and tells the server which it has; the
    server then sends a reference instead (Streamlit's message cache). A browser that dropped the
    message meanwhile (a fragment's st.rerun starts a full run with an older report) throws
    "Cached ForwardMsg MISS" and draws nothing for that element. .streamlit/config.toml turns
    references off: every message comes whole, even to a client that says it has them all."""
    with raw.Session(server.url) as s:
        s.run("bert_heads")
        hashes = [h for _, h, _ in s.received if h]
        assert len(hashes) > 10
        assert not [h for _, h, c in s.received if c]  # nothing is offered for the cache
        s.received.clear()
        s.rerun(cached=hashes)
        kinds = [k for k, _, _ in s.received]
        assert "ref_hash" not in kinds and "delta" in kinds, kinds


def test_every_pin_is_acknowledged_or_fails_with_a_message(server):
    """The teacher's Next: a message that names the step and the pin's number, and the view's
    line that shows the pin as the database has it. A pin that cannot be made (the class was ended
    from another device meanwhile) says so."""
    code, teacher = classes.start_class(DEFAULT_MODEL, TEXT, url=server.db)
    with raw.Session(server.url, cookies={"mha_teacher": teacher}) as t:
        t.run("classroom", query="teach=1")
        t.click("Everyone to the next step →")
        said = " ".join(t.texts())
        assert "Pinned for everyone: step 2 (pin 2)." in said and "pin 2" in said, said[-1500:]
        assert classes.teacher_class(teacher, url=server.db).pin.step == "stages"
        classes.end_class(teacher, url=server.db)  # ended on another device
        t.click("Everyone to the next step →")
        said = " ".join(t.texts())
        assert "This teacher key opens no class" in said and not t.exceptions(), said[-1500:]


def test_a_teacher_who_closed_the_view_finds_the_class_again_until_leaving(server):
    """The Class page offers the way back to the class whose key this browser's cookie holds,
    and only while that class is open; a forged cookie offers nothing."""
    code, teacher = classes.start_class(DEFAULT_MODEL, TEXT, url=server.db)
    with raw.Session(server.url, cookies={"mha_teacher": teacher}) as t:
        t.run("classroom")
        t.click(f"Back to your class {code[:4]} {code[4:]}")
        assert f"Class {code[:4]} {code[4:]}" in t.texts() and "teach=1" in t.query
    with raw.Session(server.url, cookies={"mha_teacher": "forged"}) as t:
        t.run("classroom")
        assert not [w for w in t.widgets if w.startswith("Back to your class")]


def test_one_seat_answering_hundreds_of_versions_does_not_flood_the_teachers_view(server):
    """Step 3 has a version per layer and pair of heads (6 x 12 x 12 here): a script's seat that
    answers 300 of them gets at most report.SHOWN histograms drawn, the rest counted in a line,
    and the view still refreshes quickly. Then the teacher locks the class: no new seat."""
    import json

    from classroom import report
    from ui.quiz import question_tag
    from ui.state import Inputs

    code, teacher = classes.start_class(DEFAULT_MODEL, TEXT, "two-heads", url=server.db)
    flood = classes.join(code, "Flood", url=server.db)
    tag = question_tag(Inputs.from_raw(DEFAULT_MODEL, TEXT), "two-heads")
    rows = []
    for n in range(300):
        layer, a, b = n % 6, (n // 6) % 12, (n // 72) % 12
        qid = f"{tag}-sub-{layer}-{a}-{b}"
        rows.append(dict(qid=qid, keys=[f"q_{qid}"], value=0, options=["Yes", "No"], right=False))
    for r in rows:
        classes.record_answer(flood.token, r["qid"], r["keys"], r["value"], r["options"], r["right"], url=server.db)
    with raw.Session(server.url, cookies={"mha_teacher": teacher}) as t:
        t0 = time.perf_counter()
        t.run("classroom", query="teach=1")
        took = time.perf_counter() - t0
        charts = [json.loads(p.spec) for k, p in t.elements if k == "plotly_chart"]
        assert len(charts) <= report.SHOWN, len(charts)
        assert any("not drawn" in x and "other versions" in x for x in t.texts()), t.texts()[-8:]
        assert took < 20, took
        t.set("Lock the class: no new seats", True)
        t.rerun()
        assert not t.exceptions()
    assert classes.teacher_class(teacher, url=server.db).locked
    with raw.Session(server.url) as s:
        join(s, code, "Latecomer")
        assert any("This class is locked" in x for x in s.texts()), s.texts()[-5:]
    assert "Latecomer" not in nicknames(server.db, teacher)
