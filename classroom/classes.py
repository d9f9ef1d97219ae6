"""What a teacher and a student may do in a class, each a short transaction; every write is
validated here (the app's widgets are not trusted), and each reads only what its token allows.

A class has a code that students type (8 characters from 32, about 2^40 codes) and a teacher
token (192 random bits) that only the teacher's link carries; a student's seat has its own token
(192 bits), which the student's browser keeps. The database stores SHA-256 hashes of the tokens,
never the tokens. Classes older than EXPIRES seconds are deleted with their data.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from mha.lesson import steps
from mha.models import catalog

from . import db, limits, lookalike

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no I, O, 0 or 1: read aloud from a projector
CODE_LENGTH = 8
EXPIRES = 24 * 3600.0
NICKNAME = re.compile(r"[^\W_](?:[\w .'-]{0,22}[^\W_])?")  # letters or digits at both ends
NICKNAME_MAX = 24
# ui.quiz.question_tag ("<step key>:<sentence>") + "-" + the question's name
# [+ "-" + its version: step 1's token, step 3's layer and heads]
QID = re.compile(r"([a-z]+(?:-[a-z]+){0,3}):([0-9a-f]{16})-([a-z]+)(?:-[0-9]{1,4}){0,3}")
SEATS = 60  # seats per class unless MHA_CLASS_SEATS says otherwise
MAX_NUMBER = 2**53  # what a browser's number box holds exactly


class ClassError(ValueError):
    """A request the class cannot take: the message says why, in words for the person who made it."""


class WrongCode(ClassError):
    """A class code that opens no class (counted: classroom.limits)."""


@dataclass(frozen=True)
class Pin:
    """What the teacher put on every screen; `revision` grows with every pin."""

    model: str
    text: str
    step: str  # the step's key (mha.lesson.steps.KEYS)
    revision: int


@dataclass(frozen=True)
class Seat:
    """A student in a class (token: only right after joining; the browser keeps it)."""

    code: str
    nickname: str
    pin: Pin
    token: str = ""


@dataclass(frozen=True)
class Answer:
    """A student's first answer to one question (qid: on one sentence)."""

    nickname: str
    qid: str
    record: str
    keys: tuple[str, ...]
    value: str
    label: str
    options: tuple[str, ...]
    right: bool
    at: float
    expected: tuple[str, ...] = ()  # the right option(s) or typed answer, as labels
    latest: str = ""  # the answer shown now (a value like `value`)
    version: str = ""  # the version of the question in words ("following “mole” (2)")
    sentence: str = ""  # the first 200 characters of the sentence it was asked on

    @property
    def step(self) -> str:
        """The key of the question's step."""
        return self.record.split(":", 1)[0]


@dataclass(frozen=True)
class TeacherView:
    """Everything the teacher's link may read: the code, the pin, who joined, every first answer."""

    code: str
    pin: Pin
    nicknames: tuple[str, ...]
    answers: tuple[Answer, ...]
    expires: float = 0.0  # seconds since the epoch: when the class ends on its own
    locked: bool = False  # no new seat


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def normal_code(code: str) -> str:
    """A typed class code as stored: upper case, spaces and dashes out."""
    return re.sub(r"[\s-]", "", code or "").upper()[:32]


def checked_pin(model: str, text: str, step: str) -> tuple[str, str, str]:
    """(model, cleaned text, step), or ClassError: a model of the allow-list, a sentence that is
    not empty (control characters out, at most catalog.MAX_CHARS characters) and a lesson step."""
    names = [s.name for s in catalog.available_models()]
    if model not in names:
        raise ClassError(f"That model is not on the list: pick one of {', '.join(names)}.")
    cleaned, cut = catalog.clean_text(text if isinstance(text, str) else "")
    if cut:
        raise ClassError(f"The sentence is longer than {catalog.MAX_CHARS:,} characters: shorten it.")
    if not cleaned.strip():
        raise ClassError("Type a sentence for the class first.")
    if not isinstance(step, str) or step not in steps.KEYS:
        raise ClassError("That is not a step of the lesson.")
    return model, cleaned.strip(), step


def checked_nickname(nickname: str) -> str:
    """The nickname in Unicode's compatibility form (NFKC: "Á" typed with a combining accent is one
    letter, fullwidth "ＡＮＡ" is "ANA") with its spaces tidied, or ClassError: 1-24 letters, digits,
    spaces and . ' - _, starting and ending with a letter or digit (no markup, no formula for a
    spreadsheet)."""
    name = " ".join(unicodedata.normalize("NFKC", nickname or "").split())
    if len(name) > NICKNAME_MAX:
        raise ClassError(f"A nickname has at most {NICKNAME_MAX} characters.")
    if not NICKNAME.fullmatch(name):
        raise ClassError(
            "A nickname uses letters, digits, spaces and . ' - _ only, and starts and ends with a letter or digit."
        )
    return name


def _pin(row) -> Pin:
    return Pin(row.model, row.text, row.step, row.revision)


def purge(url: str | None = None) -> int:
    """Delete every class older than EXPIRES with its seats and answers, and the failed attempts
    older than their window; then SQLite's write-ahead log is copied into the file and emptied
    (db.forget). The number of classes deleted. Nothing is made where no database is yet (a
    server whose class mode was never used)."""
    url = url or db.default_url()
    sa_url = sa.make_url(url)
    if sa_url.get_backend_name() == "sqlite" and sa_url.database not in (None, "", ":memory:"):
        if not os.path.exists(sa_url.database):
            return 0
    eng = db.engine(url)
    now = time.time()
    with eng.begin() as conn:
        old = conn.execute(sa.select(db.classes.c.id).where(db.classes.c.created < now - EXPIRES)).scalars().all()
        _purge(conn, now)
    db.forget(eng)
    return len(old)


def _purge(conn: sa.Connection, now: float) -> None:
    old = sa.select(db.classes.c.id).where(db.classes.c.created < now - EXPIRES)
    _delete_classes(conn, old)
    limits.forget_old(conn, now)


def _delete_classes(conn: sa.Connection, ids) -> None:
    conn.execute(db.answers.delete().where(db.answers.c.class_id.in_(ids)))
    conn.execute(db.seats.delete().where(db.seats.c.class_id.in_(ids)))
    conn.execute(db.classes.delete().where(db.classes.c.id.in_(ids)))


def start_class(model: str, text: str, step: str = steps.KEYS[0], url: str | None = None) -> tuple[str, str]:
    """A new class pinned to (model, text, step): (its code for students, the teacher's token)."""
    model, text, step = checked_pin(model, text, step)
    eng, now = db.engine(url), time.time()
    with eng.begin() as conn:
        _purge(conn, now)
    for _ in range(10):
        code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
        token = secrets.token_urlsafe(24)
        row = dict(code=code, teacher_hash=_hash(token), created=now, model=model, text=text, step=step, revision=1)
        try:
            with eng.begin() as conn:
                conn.execute(db.classes.insert().values(**row))
            return code, token
        except sa.exc.IntegrityError:  # the code is taken (or, never in practice, the token): draw again
            continue
    raise ClassError("Could not make a free class code: try again.")


def _teacher(token: str, address: str, url: str | None) -> tuple[sa.Engine, int]:
    """The class `token` steers. A teacher token (192 random bits) cannot be guessed, so a wrong one
    is not counted against the address: an open teacher tab of an ended class, which asks every
    2 s, must not lock its school out of joining."""
    eng, now = db.engine(url), time.time()
    with eng.connect() as conn:
        row = conn.execute(sa.select(db.classes).where(db.classes.c.teacher_hash == _hash(token or ""))).first()
    if row is not None and row.created < now - EXPIRES:
        row = None
    if row is None:
        raise ClassError("This teacher key opens no class: the class has ended, or the key is not complete.")
    return eng, row.id


def teacher_class(token: str, address: str = "", url: str | None = None) -> TeacherView:
    """What the teacher's link shows: the class's code, pin, nicknames and every first answer.
    ClassError for a link that opens no class."""
    eng, class_id = _teacher(token, address, url)
    with eng.connect() as conn:
        row = conn.execute(sa.select(db.classes).where(db.classes.c.id == class_id)).one()
        people = conn.execute(
            sa.select(db.seats.c.id, db.seats.c.nickname).where(db.seats.c.class_id == class_id).order_by(db.seats.c.id)
        ).all()
        rows = conn.execute(
            sa.select(db.answers, db.seats.c.nickname)
            .join(db.seats, db.seats.c.id == db.answers.c.seat_id)
            .where(db.answers.c.class_id == class_id)
            .order_by(db.answers.c.at, db.answers.c.id)
        ).all()
    nicknames, answered = tuple(p.nickname for p in people), tuple(map(_answer, rows))
    return TeacherView(row.code, _pin(row), nicknames, answered, row.created + EXPIRES, bool(row.locked))


def pin(token: str, model: str, text: str, step: str, address: str = "", url: str | None = None) -> Pin:
    """Put (model, text, step) on every student's screen: the class's new pin."""
    model, text, step = checked_pin(model, text, step)
    eng, class_id = _teacher(token, address, url)
    with eng.begin() as conn:
        conn.execute(
            db.classes.update()
            .where(db.classes.c.id == class_id)
            .values(model=model, text=text, step=step, revision=db.classes.c.revision + 1)
        )
        row = conn.execute(sa.select(db.classes).where(db.classes.c.id == class_id)).one()
    return _pin(row)


def end_class(token: str, address: str = "", url: str | None = None) -> None:
    """End the class: its pin, seats and answers are deleted."""
    eng, class_id = _teacher(token, address, url)
    with eng.begin() as conn:
        _delete_classes(conn, [class_id])
    db.forget(eng)


def seats_cap() -> int:
    """The most seats a class has: MHA_CLASS_SEATS, default SEATS (a class of 40 and spares)."""
    try:
        return max(1, int(os.environ.get("MHA_CLASS_SEATS", SEATS)))
    except ValueError:
        return SEATS


def join(
    code: str, nickname: str = "", address: str = "", url: str | None = None, failed: int = 0, kept: str = ""
) -> Seat:
    """A seat in the class with `code` (the returned Seat carries the student's token).

    `failed`: the wrong codes this session typed before (it waits limits.session_wait first);
    `kept`: a seat token this browser already holds: in this class, that seat is the answer (one
    seat per browser) unless the nickname typed now is another one's (a shared lab PC: the next
    student gets a seat of their own, never the last one's). ClassError for a code that opens no
    class (counted as a failed attempt from `address`), a full class, or a nickname taken or
    invalid; no nickname gives "Student <n>"."""
    if len(code or "") > 64:  # before any normalising
        raise WrongCode("No class has that code: check it with your teacher (8 letters and digits).")
    if len(nickname or "") > 4 * NICKNAME_MAX:
        raise ClassError(f"A nickname has at most {NICKNAME_MAX} characters.")
    eng = db.engine(url)
    name = checked_nickname(nickname) if (nickname or "").strip() else ""
    with eng.connect() as conn:
        wait = max(limits.session_wait(failed), limits.address_wait(conn, address, time.time()))
    time.sleep(wait)  # the same for a right and a wrong code: the wait tells nothing
    now = time.time()
    with eng.begin() as conn:
        row = conn.execute(sa.select(db.classes).where(db.classes.c.code == normal_code(code))).first()
        if row is None or row.created < now - EXPIRES:
            limits.fail(conn, address, now)
            row = None
    if row is None:
        raise WrongCode("No class has that code: check it with your teacher (8 letters and digits).")
    if kept:
        with eng.connect() as conn:
            mine = _seat_row(conn, kept)
        same = not name or (mine is not None and lookalike.key(name) == lookalike.key(mine.nickname))
        if mine is not None and mine.class_id == row.id and same:
            return Seat(row.code, mine.nickname, _pin(row), kept)
    if row.locked:
        raise ClassError("This class is locked: no one can join now. Ask your teacher.")
    cap = seats_cap()
    for attempt in range(20):
        token = secrets.token_urlsafe(24)
        try:
            with eng.begin() as conn:
                # the class's row locked (PostgreSQL; SQLite writes one at a time anyway): two replicas
                # cannot both take the last seat
                conn.execute(sa.select(db.classes.c.id).where(db.classes.c.id == row.id).with_for_update())
                n = conn.execute(sa.select(sa.func.count()).where(db.seats.c.class_id == row.id)).scalar_one()
                if n >= cap:
                    raise ClassError(f"This class is full ({cap} seats): ask your teacher to remove a seat.")
                chosen = name or f"Student {n + 1 + attempt}"
                values = dict(
                    class_id=row.id,
                    token_hash=_hash(token),
                    nickname=chosen,
                    nickname_key=lookalike.key(chosen),
                    joined=now,
                )
                conn.execute(db.seats.insert().values(**values))
            return Seat(row.code, chosen, _pin(row), token)
        except sa.exc.IntegrityError:
            if name:
                raise ClassError(
                    f"Someone in this class is already called {name} (or a name that looks the same): "
                    "pick another nickname."
                ) from None
    raise ClassError("Could not find a free nickname: type one.")


def lock(token: str, locked: bool, url: str | None = None) -> None:
    """The teacher locks the class (no new seat; a browser with a seat still finds it) or opens it."""
    eng, class_id = _teacher(token, "", url)
    with eng.begin() as conn:
        conn.execute(db.classes.update().where(db.classes.c.id == class_id).values(locked=bool(locked)))


def remove_seat(token: str, nickname: str, url: str | None = None) -> bool:
    """The teacher removes the seat called `nickname` with its answers (a seat a script made, a
    student who joined twice); False if there is none."""
    eng, class_id = _teacher(token, "", url)
    with eng.begin() as conn:
        seat = conn.execute(
            sa.select(db.seats.c.id).where(db.seats.c.class_id == class_id, db.seats.c.nickname == nickname)
        ).first()
        if seat is None:
            return False
        conn.execute(db.answers.delete().where(db.answers.c.seat_id == seat.id))
        conn.execute(db.seats.delete().where(db.seats.c.id == seat.id))
    db.forget(eng)
    return True


def _seat_row(conn: sa.Connection, token: str):
    return conn.execute(
        sa.select(db.seats.c.id, db.seats.c.class_id, db.seats.c.nickname, db.classes)
        .join(db.classes, db.classes.c.id == db.seats.c.class_id)
        .where(db.seats.c.token_hash == _hash(token or ""))
    ).first()


def seat_of(token: str, url: str | None = None) -> Seat | None:
    """The seat `token` holds, with its class's current pin; None if there is none (any more)."""
    if not token:
        return None
    with db.engine(url).connect() as conn:
        row = _seat_row(conn, token)
    if row is None or row.created < time.time() - EXPIRES:
        return None
    return Seat(row.code, row.nickname, _pin(row))


def _answer(row) -> Answer:
    return Answer(
        row.nickname,
        row.qid,
        row.record,
        tuple(row.keys.split(",")),
        row.value,
        row.label,
        tuple(json.loads(row.options)),
        bool(row.right),
        row.at,
        tuple(json.loads(row.expected or "[]")),
        row.latest or row.value,
        row.version,
        row.sentence,
    )


def _whole(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def checked_answer(
    qid: str,
    keys: Sequence[str],
    value: int | Sequence[int],
    options: Sequence[str] | None,
    expected: Sequence[str] = (),
) -> tuple[str, str, str]:
    """(record, value, label) of a valid answer, or ClassError: a question of the lesson (its
    qid names a step and question of mha.lesson.steps.QUESTIONS), settings named after it, one of its
    options (an index) or whole numbers from 0 to MAX_NUMBER (`options` None), and right
    answers (`expected`) among its options, if it has options."""
    found = QID.fullmatch(qid or "")
    record = f"{found.group(1)}:{found.group(3)}" if found else ""
    if record not in steps.QUESTIONS:
        raise ClassError("Not a question of the lesson.")
    if not keys or len(keys) > 4 or not all(re.fullmatch(re.escape(f"q_{qid}") + r"[\w-]{0,40}", k) for k in keys):
        raise ClassError("Not the question's answer.")
    expected = list(expected)
    if len(expected) > 4 or not all(isinstance(e, str) and len(e) <= 150 for e in expected):
        raise ClassError("Not the question's right answer.")
    if options is not None:
        options = list(options)
        if not 2 <= len(options) <= 12 or not all(isinstance(o, str) and 0 < len(o) <= 150 for o in options):
            raise ClassError("Not the question's options.")
        if not set(expected) <= set(options):
            raise ClassError("Not the question's right answer.")
        if not _whole(value) or not 0 <= value < len(options):
            raise ClassError("That answer is not one of the question's options.")
        return record, str(value), options[value]
    numbers = list(value) if isinstance(value, list | tuple) else [value]
    if not 1 <= len(numbers) <= 4 or not all(_whole(v) and 0 <= v <= MAX_NUMBER for v in numbers):
        raise ClassError(f"An answer here is whole numbers from 0 to {MAX_NUMBER:,}.")
    return record, ",".join(map(str, numbers)), " x ".join(map(str, numbers))


def record_answer(
    token: str,
    qid: str,
    keys: Sequence[str],
    value: int | Sequence[int],
    options: Sequence[str] | None,
    right: bool,
    expected: Sequence[str] = (),
    version: str = "",
    sentence: str = "",
    url: str | None = None,
) -> bool:
    """Keep a student's answer to `qid`: the first one for the class (True), or, answered before,
    only as the answer the student's page shows now (False). ClassError for an invalid answer or
    a seat that is gone."""
    record, stored, label = checked_answer(qid, keys, value, options, expected)
    eng = db.engine(url)
    with eng.connect() as conn:
        seat = _seat_row(conn, token)
    if seat is None:
        raise ClassError("You are not in a class any more: the class has ended.")
    row = dict(
        class_id=seat.class_id,
        seat_id=seat.id,
        qid=qid,
        record=record,
        keys=",".join(keys),
        value=stored,
        label=label,
        options=json.dumps(list(options or [])),
        right=bool(right),
        at=time.time(),
        expected=json.dumps(list(expected)),
        latest=stored,
        version=str(version)[:120],
        sentence=str(sentence)[:200],
    )
    try:
        with eng.begin() as conn:
            conn.execute(db.answers.insert().values(**row))
        return True
    except sa.exc.IntegrityError:  # answered before: the first answer stays, the shown one changes
        with eng.begin() as conn:
            conn.execute(
                db.answers.update()
                .where(db.answers.c.seat_id == seat.id, db.answers.c.qid == qid)
                .values(latest=stored)
            )
        return False


def answers_of(token: str, url: str | None = None) -> list[Answer]:
    """The first answers of the seat `token` holds (its own, no one else's), oldest first."""
    with db.engine(url).connect() as conn:
        seat = _seat_row(conn, token)
        if seat is None:
            return []
        rows = conn.execute(
            sa.select(db.answers, db.seats.c.nickname)
            .join(db.seats, db.seats.c.id == db.answers.c.seat_id)
            .where(db.answers.c.seat_id == seat.id)
            .order_by(db.answers.c.at, db.answers.c.id)
        ).all()
    return [_answer(r) for r in rows]
