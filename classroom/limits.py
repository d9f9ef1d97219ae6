"""Wrong class codes slow the one who types them down; nothing anyone types refuses a right code.

Why guessing a code is infeasible, in numbers. A code is 8 characters from 32: 32^8 = 2^40 =
1.1e12 codes. With C classes open at once, one guess opens one of them with probability
C / 2^40: for C = 100, 9.1e-11. A guess is a script run of the Class page on the server, and a
session waits before each guess after its FREE_TRIES-th wrong one (`session_wait`: 1, 2, 4, ...,
MAX_WAIT s), so a script must open a new session (a WebSocket, a session, a run) per guess to
go fast. Even at 100 such guesses a second, sustained for the 24 h a class lives (8.6e6
guesses, more than a 2-core replica can serve while it also serves a class), the chance of
opening any of 100 classes is 8.6e6 x 9.1e-11 = 0.08 %, and the attempt is visible in the
database (`failures`, by address) and in the server's CPU. A teacher's token (192 random bits)
and a seat's (192 bits) are not guessable at any rate and are not counted.

What is not done, on purpose: refusing an address. A class behind one NAT or one nginx shares
one address; a lockout by address let one student lock the whole class out, right codes
included. An address with MAX_FAILURES wrong codes in WINDOW s makes every new check from it
wait FLAGGED_WAIT s (the same wait for a right and a wrong code, so the wait tells nothing), and
is then checked like any other.

The address is the one the server's uvicorn resolves: the peer's, or, from a proxy named in
FORWARDED_ALLOW_IPS (uvicorn's setting; default 127.0.0.1 and ::1, the nginx of
deploy/school.sh; deploy/compose.yaml names its network), the last address of X-Forwarded-For
that is not such a proxy. A header from anyone else is ignored, so a student cannot charge
failures to a classmate's address.
"""

from __future__ import annotations

import sqlalchemy as sa

from .db import failures

WINDOW = 600.0  # seconds
MAX_FAILURES = 60  # wrong codes from one address in WINDOW before its checks wait FLAGGED_WAIT
FLAGGED_WAIT = 2.0  # s
FREE_TRIES = 2  # wrong codes a session may type before it waits
MAX_WAIT = 30.0  # s: the longest a session waits before a check


def session_wait(failed: int) -> float:
    """Seconds a session that has typed `failed` wrong codes waits before its next check."""
    return 0.0 if failed < FREE_TRIES else min(2.0 ** (failed - FREE_TRIES), MAX_WAIT)


def address_wait(conn: sa.Connection, address: str, now: float) -> float:
    """FLAGGED_WAIT if `address` has MAX_FAILURES wrong codes in the last WINDOW seconds, else 0."""
    recent = sa.select(sa.func.count()).where(failures.c.address == address[:64], failures.c.at > now - WINDOW)
    return FLAGGED_WAIT if conn.execute(recent).scalar_one() >= MAX_FAILURES else 0.0


def fail(conn: sa.Connection, address: str, now: float) -> None:
    """Count one failed attempt from `address`."""
    conn.execute(failures.insert().values(address=address[:64], at=now))


def forget_old(conn: sa.Connection, now: float) -> None:
    """Drop failures older than the window."""
    conn.execute(failures.delete().where(failures.c.at <= now - WINDOW))
