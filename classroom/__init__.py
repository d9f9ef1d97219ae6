"""Class mode: a teacher's class on a database (SQLite by default, PostgreSQL for several
replicas), through SQLAlchemy with Alembic migrations. Plain Python: no Streamlit, no model.

- `db`: the schema, the engine chosen by one setting (MHA_CLASS_DB) and the migrations.
- `classes`: what a teacher and a student may do (start, join, pin, answer, read, end), every
  write validated here.
- `report`: the teacher's histogram, scores per question and CSV.
- `limits`: the failed-attempt limiter (class codes and teacher links cannot be guessed).
"""

from .classes import (
    Answer,
    ClassError,
    Pin,
    Seat,
    TeacherView,
    answers_of,
    end_class,
    join,
    pin,
    record_answer,
    seat_of,
    start_class,
    teacher_class,
)

__all__ = [
    "Answer",
    "ClassError",
    "Pin",
    "Seat",
    "TeacherView",
    "answers_of",
    "end_class",
    "join",
    "pin",
    "record_answer",
    "seat_of",
    "start_class",
    "teacher_class",
]
