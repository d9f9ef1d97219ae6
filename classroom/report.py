"""The teacher's figures, read from a TeacherView: the histogram of first answers to a question,
the class's score per question, and the CSV of every nickname's answers."""

from __future__ import annotations

import csv
import io
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from mha.lesson import steps

from .classes import Answer, TeacherView


@dataclass(frozen=True)
class Histogram:
    """First answers to one question on one sentence, in one version of it (`variant`, in words: the
    token step 1 follows, the layer and heads step 3 compares; "" if the question has one): each
    option (or typed answer) and how many students gave it first; which of them are right."""

    qid: str
    record: str  # the question (a key of mha.lesson.steps.QUESTIONS)
    variant: str
    labels: tuple[str, ...]
    counts: tuple[int, ...]
    right: tuple[bool, ...]

    @property
    def answered(self) -> int:
        return sum(self.counts)


Truth = Callable[[str, str], tuple[tuple[str, ...] | None, tuple[str, ...]]]


SHOWN = 3  # versions of one question drawn at most: the most answered (one seat can answer hundreds)


def histograms(view: TeacherView, tag: str, truth: Truth | None = None, limit: int = SHOWN) -> list[Histogram]:
    """One histogram per question asked on the sentence `tag` (ui.quiz.question_tag of the pin)
    and per version of it that students answered (its right answer depends on the version: the
    token step 1 follows, the heads step 3 compares), in the lesson's order, the most answered
    version first: the options in their order (typed answers by count, the right one added if no
    one gave it), each student once, and which of them are right.

    `truth(record, variant)`: the question as the server computes it on the pin (its options,
    None for typed numbers, and its right answers; ValueError for a version the pin has not).
    Given, the options and right answers are its, and an answer stored with other options (asked
    on another input) is not counted; without it, they are the first answer's. At most `limit`
    versions of each question, the most answered (a student who answers hundreds of versions
    costs the view no more than three); `unshown` counts the rest."""
    groups: dict[tuple[str, str], list[Answer]] = {}
    for a in view.answers:
        if a.qid.startswith(f"{tag}-"):
            groups.setdefault((a.qid, "" if truth else a.version), []).append(a)
    order = list(steps.QUESTIONS)
    out: list[Histogram] = []
    ranked = sorted(groups.items(), key=lambda kv: (order.index(kv[1][0].record), -len(kv[1]), kv[1][0].at))
    for (qid, _), given in ranked:
        if sum(h.record == given[0].record for h in out) >= limit:
            continue
        record = given[0].record
        variant = qid.removeprefix(f"{tag}-{record.split(':', 1)[1]}").lstrip("-")
        if truth is None:
            options = given[0].options or None
            right = {label for a in given for label in a.expected} | {a.label for a in given if a.right}
        else:
            try:
                options, expected = truth(record, variant)
            except (ValueError, IndexError):
                continue  # a version this sentence does not have: not the pinned question
            given = [a for a in given if a.options == (options or ())]
            right = set(expected)
        counts = Counter(a.label for a in given)
        if not options:
            options = (*(label for label, _ in counts.most_common()), *sorted(right - set(counts)))
        shown = tuple(counts[o] for o in options), tuple(o in right for o in options)
        out.append(Histogram(qid, record, given[0].version if given else "", tuple(options), *shown))
    return out


def unshown(view: TeacherView, tag: str, shown: list[Histogram]) -> tuple[int, int]:
    """(versions, answers) on the sentence `tag` that `shown` does not draw."""
    drawn = {h.qid for h in shown}
    rest = [a for a in view.answers if a.qid.startswith(f"{tag}-") and a.qid not in drawn]
    return len({a.qid for a in rest}), len(rest)


def scores(view: TeacherView) -> list[tuple[str, int, int]]:
    """Per question of the lesson: (what was asked, students right at their first answer, students
    who answered). A student's first answer to a question counts, on whatever sentence (as the
    lesson's own score counts it)."""
    first: dict[tuple[str, str], bool] = {}
    for a in view.answers:  # oldest first
        first.setdefault((a.nickname, a.record), a.right)
    out = []
    for record, asked in steps.QUESTIONS.items():
        got = [right for (_, rec), right in first.items() if rec == record]
        out.append((asked, sum(got), len(got)))
    return out


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet may read as a formula (OWASP, CSV injection)


def safe_cell(value: object) -> object:
    """A CSV cell a spreadsheet shows as text: a string starting with = + - @ tab or carriage
    return gets a leading apostrophe (OWASP's rule for CSV injection), also when spaces or
    invisible format characters come first or the sign is a full-width one (＝, read after NFKC);
    numbers stay numbers."""
    if not isinstance(value, str):
        return value
    seen = unicodedata.normalize("NFKC", value)
    seen = "".join(c for c in seen if unicodedata.category(c) != "Cf").lstrip(" \u00a0")
    if value.startswith(FORMULA_START) or seen.startswith(FORMULA_START):
        return "'" + value
    return value


def answers_csv(view: TeacherView) -> str:
    """Every first answer, one row each: nickname, step, question, its version, the first answer, right
    or not, the answer shown now, the sentence (its first 200 characters), seconds since the class's first answer."""
    buf = io.StringIO()
    out = csv.writer(buf)
    out.writerow(
        ["nickname", "step", "question", "version", "first answer", "right", "answer now", "sentence", "seconds"]
    )
    start = min((a.at for a in view.answers), default=0.0)
    for a in view.answers:
        now = a.latest if not a.options else a.options[int(a.latest)]
        now = now.replace(",", " x ") if not a.options else now
        row = [
            a.nickname,
            steps.number(a.step),
            steps.QUESTIONS[a.record],
            a.version,
            a.label,
            "yes" if a.right else "no",
            now,
        ]
        out.writerow(
            [safe_cell(c) for c in (*row, a.sentence, round(a.at - start, 1))]
        )  # every cell: a student typed some
    return buf.getvalue()
