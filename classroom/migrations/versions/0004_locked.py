"""A class can be locked: no new seat (a script that takes every seat, or takes back a removed
one, is stopped by the teacher); a browser that has a seat still finds it.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    with op.batch_alter_table("classes", recreate="never") as batch:  # a copy would cascade-delete
        batch.add_column(sa.Column("locked", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("classes", recreate="never") as batch:
        batch.drop_column("locked")
