"""The class-mode database: its tables, the engine one setting chooses, and the migrations.

MHA_CLASS_DB is a SQLAlchemy URL. Unset, it is a SQLite file created on first use
(~/.local/share/mha-explorer/classes.sqlite, or MHA_CLASS_DIR/classes.sqlite): one server.
Several replicas share one PostgreSQL database: postgresql+psycopg://user:password@host/name.
Every statement goes through SQLAlchemy Core (no SQL built from strings); the schema is made
and changed only by the Alembic migrations in classroom/migrations/versions.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

metadata = sa.MetaData()

classes = sa.Table(
    "classes",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("code", sa.String(16), nullable=False, unique=True),  # what students type
    sa.Column("teacher_hash", sa.String(64), nullable=False, unique=True),  # sha256 of the teacher's token
    sa.Column("created", sa.Float, nullable=False),  # seconds since the epoch
    sa.Column("model", sa.String(100), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("step", sa.String(40), nullable=False, server_default="one-query"),  # the step's key (since 0003)
    sa.Column("revision", sa.Integer, nullable=False),  # +1 at every pin: students follow a new one
    sa.Column("locked", sa.Boolean, nullable=False, server_default=sa.false()),  # no new seat (since 0004)
)
seats = sa.Table(
    "seats",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("class_id", sa.Integer, sa.ForeignKey("classes.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),  # sha256 of the student's token
    sa.Column("nickname", sa.String(40), nullable=False),
    sa.Column("nickname_key", sa.String(40), nullable=False),  # lookalike.key: one "Sam" (or "Ѕam") per class
    sa.Column("joined", sa.Float, nullable=False),
    sa.UniqueConstraint("class_id", "nickname_key", name="uq_seat_nickname"),
)
answers = sa.Table(
    "answers",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("class_id", sa.Integer, sa.ForeignKey("classes.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("seat_id", sa.Integer, sa.ForeignKey("seats.id", ondelete="CASCADE"), nullable=False),
    sa.Column("qid", sa.String(80), nullable=False),  # "<step key>:<sentence tag>-<name>" (ui.quiz.question_tag)
    sa.Column("record", sa.String(40), nullable=False),  # "<step key>:<name>", a key of mha.lesson.steps.QUESTIONS
    sa.Column("keys", sa.String(200), nullable=False),  # the settings the answer was given in, comma-separated
    sa.Column("value", sa.String(80), nullable=False),  # the option's index, or the numbers typed, comma-separated
    sa.Column("label", sa.String(200), nullable=False),  # what the student saw: the option's text
    sa.Column("options", sa.Text, nullable=False),  # the question's options (JSON list; [] for numbers)
    sa.Column("right", sa.Boolean, nullable=False),
    sa.Column("at", sa.Float, nullable=False),
    # since 0002
    sa.Column("expected", sa.Text, nullable=False, server_default="[]"),  # the right labels (JSON list)
    sa.Column("latest", sa.String(80), nullable=False, server_default=""),  # the answer shown now (value)
    sa.Column("version", sa.String(120), nullable=False, server_default=""),  # e.g. "following “mole” (2)"
    sa.Column("sentence", sa.String(200), nullable=False, server_default=""),  # its first 200 characters
    sa.UniqueConstraint("seat_id", "qid", name="uq_answer_first"),  # a question's first answer only
)
failures = sa.Table(  # failed class codes and teacher links, by network address (classroom.limits)
    "failures",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("address", sa.String(64), nullable=False, index=True),
    sa.Column("at", sa.Float, nullable=False, index=True),
)

MIGRATIONS = Path(__file__).with_name("migrations")
_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def default_url() -> str:
    """MHA_CLASS_DB, else a SQLite file in MHA_CLASS_DIR or ~/.local/share/mha-explorer."""
    if os.environ.get("MHA_CLASS_DB"):
        return os.environ["MHA_CLASS_DB"]
    folder = Path(os.environ.get("MHA_CLASS_DIR") or Path.home() / ".local" / "share" / "mha-explorer")
    return f"sqlite:///{folder / 'classes.sqlite'}"


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # readers do not wait for the one writer
    cursor.execute("PRAGMA busy_timeout=5000")  # a writer waits up to 5 s for another
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA secure_delete=ON")  # deleted rows are overwritten, not left in the file
    cursor.close()


def engine(url: str | None = None) -> Engine:
    """The engine for `url` (default_url()), made once per process, its schema migrated to the
    newest version on first use (and the SQLite file's folder created)."""
    url = url or default_url()
    with _lock:
        if url not in _engines:
            sa_url = sa.make_url(url)
            if sa_url.get_backend_name() == "sqlite":
                if sa_url.database and sa_url.database != ":memory:":
                    Path(sa_url.database).parent.mkdir(parents=True, exist_ok=True)
                made = sa.create_engine(url, connect_args={"check_same_thread": False, "timeout": 10})
                sa.event.listen(made, "connect", _sqlite_pragmas)
            else:
                made = sa.create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=10)
            if os.environ.get("MHA_CLASS_MIGRATE", "1") == "0":  # migrated once elsewhere (classroom.migrate)
                check_migrated(made)
            else:
                migrate(made)
            _engines[url] = made
        return _engines[url]


def migrate(eng: Engine, revision: str = "head", down: bool = False) -> None:
    """Bring the schema up (or `down`) to `revision` with Alembic (the only way the schema is made
    or changed). On PostgreSQL an advisory lock makes replicas that start together migrate one at
    a time."""
    from alembic import command

    config = _alembic_config()
    with eng.begin() as conn:
        if eng.dialect.name == "postgresql":
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(7_356_001)))
        config.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(config, revision)


def _alembic_config():
    """Alembic's configuration for classroom/migrations (no alembic.ini)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


class NotMigrated(RuntimeError):
    """The database's schema is not the newest one and this process must not migrate it."""


def check_migrated(eng: Engine) -> None:
    """NotMigrated unless the schema is at the newest migration (MHA_CLASS_MIGRATE=0: a Kubernetes
    Job migrates, deploy/k8s/course; the pods only check)."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    with eng.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    if current != head:
        raise NotMigrated(f"the class database is at migration {current}, not {head}: run python -m classroom.migrate")


def forget(eng: Engine) -> None:
    """After a delete: SQLite copies its write-ahead log into the file and empties it, so that
    deleted rows (overwritten in the file: secure_delete) are not left in the log either.
    PostgreSQL reuses a deleted row's space at its next vacuum (autovacuum)."""
    if eng.dialect.name == "sqlite":
        with eng.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")


def dispose() -> None:
    """Close every engine of this process (tests; a server never needs it)."""
    with _lock:
        for made in _engines.values():
            made.dispose()
        _engines.clear()
