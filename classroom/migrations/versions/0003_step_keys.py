"""Lesson steps are named by their key, not their position: a class's pin holds the step's key
("two-heads", not 3), and an answer's question id and record begin with it ("two-heads:1a2b3c4d-sub",
"two-heads:sub", not "3-1a2b3c4d-sub", "3-sub"), so inserting a step renumbers nothing stored.
Rows written before are converted by the order the steps had then (ORDER); downgrade converts back.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"

ORDER = ("one-query", "stages", "two-heads", "concat", "jobs", "sharing", "order", "recap")  # the steps at 0002


def _convert(conn, old_to_new) -> None:
    """Every answer's qid, record and settings keys through old_to_new(step) -> step."""
    answers = sa.table("answers", sa.column("id"), sa.column("qid"), sa.column("record"), sa.column("keys"))
    rows = conn.execute(sa.select(answers.c.id, answers.c.qid, answers.c.record, answers.c["keys"])).mappings().all()
    for row in rows:
        qid, record = old_to_new(row["qid"]), old_to_new(row["record"])
        keys = ",".join(f"q_{old_to_new(k[2:])}" if k.startswith("q_") else k for k in row["keys"].split(","))
        conn.execute(sa.update(answers).where(answers.c.id == row["id"]).values(qid=qid, record=record, keys=keys))


def _to_key(text: str) -> str:
    """ "3-1a2b3c4d-sub" -> "two-heads:1a2b3c4d-sub"; "3-sub" -> "two-heads:sub"."""
    n, rest = text.split("-", 1)
    return f"{ORDER[int(n) - 1]}:{rest}" if n.isdigit() and 1 <= int(n) <= len(ORDER) else text


def _to_number(text: str) -> str:
    key, _, rest = text.partition(":")
    return f"{ORDER.index(key) + 1}-{rest}" if key in ORDER and rest else text


def upgrade() -> None:
    conn = op.get_bind()
    with op.batch_alter_table("classes", recreate="never") as batch:  # a copy would cascade-delete
        batch.add_column(sa.Column("step_key", sa.String(40), nullable=False, server_default=ORDER[0]))
    classes = sa.table("classes", sa.column("step"), sa.column("step_key"))
    for n, key in enumerate(ORDER, 1):
        conn.execute(sa.update(classes).where(classes.c.step == n).values(step_key=key))
    with op.batch_alter_table("classes", recreate="never") as batch:  # a copy would cascade-delete
        batch.drop_column("step")
        batch.alter_column("step_key", new_column_name="step", existing_type=sa.String(40))
    _convert(conn, _to_key)


def downgrade() -> None:
    conn = op.get_bind()
    with op.batch_alter_table("classes", recreate="never") as batch:  # a copy would cascade-delete
        batch.add_column(sa.Column("step_number", sa.Integer, nullable=False, server_default="1"))
    classes = sa.table("classes", sa.column("step"), sa.column("step_number"))
    for n, key in enumerate(ORDER, 1):
        conn.execute(sa.update(classes).where(classes.c.step == key).values(step_number=n))
    with op.batch_alter_table("classes", recreate="never") as batch:  # a copy would cascade-delete
        batch.drop_column("step")
        batch.alter_column("step_number", new_column_name="step", existing_type=sa.Integer)
    _convert(conn, _to_number)
