"""The teacher's figures, read from a TeacherView: the histogram of first answers to a question,
the class's score per question, and the CSV of every nickname's answers."""

from __future__ import annotations

import csv
import io
from collections import Counter
from dataclasses import dataclass

from mha import steps

from .classes import Answer, TeacherView


@dataclass(frozen=True)
class Histogram:
    """First answers to one question on one sentence, in one version of it (`variant`: the token
    step 1 follows, the layer and heads step 3 compares; "" if the question has one): each option
    (or typed answer) and how many students gave it first; which of them is right."""

    qid: str
    variant: str
    labels: tuple[str, ...]
    counts: tuple[int, ...]
    right: tuple[bool, ...]

    @property
    def answered(self) -> int:
        return sum(self.counts)


def variant_words(record: str, variant: str) -> str:
    """A version of a question in words: "the token at position 2", "layer 0, heads 0 and 1"."""
    parts = variant.split("-")
    if record == "1-spread" and len(parts) == 1:
        return f"following the token at position {parts[0]}"
    if record == "3-sub" and len(parts) == 3:
        return f"layer {parts[0]}, heads {parts[1]} and {parts[2]}"
    return variant


def histograms(view: TeacherView, tag: str) -> list[Histogram]:
    """One histogram per question asked on the sentence `tag` (ui.quiz.question_tag of the pin)
    and per version of it that students answered (its right answer depends on the version), in
    the lesson's order, the most answered version first: the options in their order (typed
    answers by count), each student once."""
    groups: dict[tuple[str, str], list[Answer]] = {}
    for a in view.answers:
        if a.qid.startswith(f"{tag}-"):
            variant = a.keys[0].removeprefix(f"q_{a.qid}").removeprefix("-") if a.options else ""
            groups.setdefault((a.qid, variant), []).append(a)
    order = list(steps.QUESTIONS)
    out = []
    for (qid, variant), given in sorted(groups.items(), key=lambda kv: (order.index(kv[1][0].record), -len(kv[1]))):
        counts = Counter(a.label for a in given)
        right = {a.label for a in given if a.right}
        options = given[0].options or tuple(label for label, _ in counts.most_common())
        words = variant_words(given[0].record, variant)
        out.append(
            Histogram(qid, words, options, tuple(counts[o] for o in options), tuple(o in right for o in options))
        )
    return out


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


def answers_csv(view: TeacherView) -> str:
    """Every first answer, one row each: nickname, step, question, answer, right, seconds since the first answer."""
    buf = io.StringIO()
    out = csv.writer(buf)
    out.writerow(["nickname", "step", "question", "answer", "right", "sentence", "seconds"])
    start = min((a.at for a in view.answers), default=0.0)
    for a in view.answers:
        out.writerow(
            [
                a.nickname,
                a.step,
                steps.QUESTIONS[a.record],
                a.label,
                "yes" if a.right else "no",
                a.qid.split("-")[1],
                round(a.at - start, 1),
            ]
        )
    return buf.getvalue()
