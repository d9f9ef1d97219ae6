"""The first schema: classes, seats, first answers and failed attempts.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "classes",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("code", sa.String(16), nullable=False, unique=True),
        sa.Column("teacher_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("model", sa.String(100), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("step", sa.Integer, nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
    )
    op.create_table(
        "seats",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("class_id", sa.Integer, sa.ForeignKey("classes.id", ondelete="CASCADE"), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("nickname", sa.String(40), nullable=False),
        sa.Column("nickname_key", sa.String(40), nullable=False),
        sa.Column("joined", sa.Float, nullable=False),
        sa.UniqueConstraint("class_id", "nickname_key", name="uq_seat_nickname"),
    )
    op.create_index("ix_seats_class_id", "seats", ["class_id"])
    op.create_table(
        "answers",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("class_id", sa.Integer, sa.ForeignKey("classes.id", ondelete="CASCADE"), nullable=False),
        sa.Column("seat_id", sa.Integer, sa.ForeignKey("seats.id", ondelete="CASCADE"), nullable=False),
        sa.Column("qid", sa.String(80), nullable=False),
        sa.Column("record", sa.String(40), nullable=False),
        sa.Column("keys", sa.String(200), nullable=False),
        sa.Column("value", sa.String(80), nullable=False),
        sa.Column("label", sa.String(200), nullable=False),
        sa.Column("options", sa.Text, nullable=False),
        sa.Column("right", sa.Boolean, nullable=False),
        sa.Column("at", sa.Float, nullable=False),
        sa.UniqueConstraint("seat_id", "qid", name="uq_answer_first"),
    )
    op.create_index("ix_answers_class_id", "answers", ["class_id"])
    op.create_table(
        "failures",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("address", sa.String(64), nullable=False),
        sa.Column("at", sa.Float, nullable=False),
    )
    op.create_index("ix_failures_address", "failures", ["address"])
    op.create_index("ix_failures_at", "failures", ["at"])


def downgrade() -> None:
    for table in ("failures", "answers", "seats", "classes"):
        op.drop_table(table)
