"""`python -m classroom.migrate`: bring class mode's database (MHA_CLASS_DB) to the newest schema
once, for deployments whose app pods only check it (MHA_CLASS_MIGRATE=0, deploy/k8s/course's Job).
Safe beside a second run: PostgreSQL migrates under an advisory lock (db.migrate)."""

from __future__ import annotations

import os
import sys

from classroom import db


def main() -> int:
    os.environ["MHA_CLASS_MIGRATE"] = "1"  # this process is the one that migrates
    eng = db.engine()
    db.check_migrated(eng)
    print(f"class database migrated ({eng.dialect.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
