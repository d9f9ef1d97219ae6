"""Failed attempts by network address: a class code that opens no class counts one, and an
address with MAX_FAILURES in the last WINDOW seconds is refused until they age out. Kept in the
database, so every replica counts the same attempts. A class code has 32^8 = 2^40 values: at 60
failures per 10 minutes an address needs on average about 3,500 years to hit one of a hundred
open classes, while a class of 40 behind one address can mistype a code more than once each."""

from __future__ import annotations

import math

import sqlalchemy as sa

from .db import failures

WINDOW = 600.0  # seconds
MAX_FAILURES = 60


class TooManyAttempts(ValueError):
    """Refused: too many failed attempts from this address lately."""


def check(conn: sa.Connection, address: str, now: float) -> None:
    """TooManyAttempts if `address` has MAX_FAILURES failures in the last WINDOW seconds."""
    recent = sa.select(failures.c.at).where(failures.c.address == address[:64], failures.c.at > now - WINDOW)
    times = sorted(conn.execute(recent).scalars())
    if len(times) >= MAX_FAILURES:
        wait = math.ceil((times[-MAX_FAILURES] + WINDOW - now) / 60)
        raise TooManyAttempts(
            f"Too many wrong class codes from this network: try again in {max(wait, 1)} minute(s), and check "
            "the code with your teacher."
        )


def fail(conn: sa.Connection, address: str, now: float) -> None:
    """Count one failed attempt from `address`."""
    conn.execute(failures.insert().values(address=address[:64], at=now))


def forget_old(conn: sa.Connection, now: float) -> None:
    """Drop failures older than the window."""
    conn.execute(failures.delete().where(failures.c.at <= now - WINDOW))
