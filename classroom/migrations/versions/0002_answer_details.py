"""An answer keeps the right answer (so the teacher can reveal it when no one gave it), the
student's latest answer (put back after a reload), the version of the question in words and the
start of the sentence it was asked on.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    with op.batch_alter_table("answers") as batch:
        batch.add_column(sa.Column("expected", sa.Text, nullable=False, server_default="[]"))
        batch.add_column(sa.Column("latest", sa.String(80), nullable=False, server_default=""))
        batch.add_column(sa.Column("version", sa.String(120), nullable=False, server_default=""))
        batch.add_column(sa.Column("sentence", sa.String(200), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("answers") as batch:
        for column in ("sentence", "version", "latest", "expected"):
            batch.drop_column(column)
