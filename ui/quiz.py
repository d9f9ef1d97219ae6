"""The lesson's quiz: questions checked against the model's own answer, the answers kept as
settings ("q_<question>", ui/settings.py), and whether each was right at the first try."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import streamlit as st

from .classroom import TROUBLE, record, restore_score, seat_token
from .scroll import scroll_here, scroll_here_done
from .settings import SETTINGS, quiz_keys, setting_widget
from .state import Inputs


def question_tag(inp: Inputs, step: str) -> str:
    """The prefix of a step's question ids, "<step key>:<sentence>": another sentence or model shows
    its questions unanswered (the score keeps each question's first answer: record_id). The
    sentence part is 64 bits of SHA-256 over an unambiguous encoding (JSON: no second sentence is
    null, never the text "None"): a class's inputs do not collide by chance or by design."""
    encoded = json.dumps([inp.model, inp.text, inp.text_b], ensure_ascii=False)
    return f"{step}:{hashlib.sha256(encoded.encode()).hexdigest()[:16]}"


def record_id(qid: str) -> str:
    """The score's record of question `qid` ("<step key>:<sentence>-<name>"): its step's key and
    its name without the sentence, so a question counts once, at its first answer, whatever
    sentence it was asked on."""
    step, rest = qid.split(":", 1)
    return f"{step}:{rest.split('-', 1)[1]}"


def first_try(qid: str, right: bool) -> None:
    """Keep whether question `qid` was answered right the first time (in the session only)."""
    st.session_state.setdefault("lesson_first", {}).setdefault(record_id(qid), right)


def _hint(hint: str | None) -> None:
    if hint:
        with st.expander("Hint", icon=":material/lightbulb:"):
            st.markdown(hint)


def choice_question(
    qid: str,
    prompt: str,
    options: Sequence[str],
    answer: int,
    why: str,
    hint: str | None = None,
    variant: str = "",
    version: str = "",
) -> bool | None:
    """A multiple-choice question checked against `answer`, with a hint to open; feedback says
    why. None until answered. `variant` names one version of the question (step 1's token): each
    version keeps its own answer, and the score counts the question once (record_id); `version`
    says it in words for a class's teacher."""
    _hint(hint)
    short = sum(len(o) for o in options) <= 60  # short options side by side: the picture after stays in view
    key = f"q_{qid}" + (f"-{variant}" if variant else "")
    picked = setting_widget(
        "radio", prompt, key, options=range(len(options)), format_func=lambda i: options[i], horizontal=short
    )
    if picked is None:
        return None
    right = picked == answer
    first_try(qid, right)
    kept = f"{qid}-{variant}" if variant else qid  # in a class each version keeps its own first answer
    record(kept, [key], picked, options, right, [options[answer]], version)
    scroll_here(key)  # the feedback and the picture it unlocks on the screen, once
    (st.success if right else st.error)(("Right. " if right else f"Not quite: it is *{options[answer]}*. ") + why)
    return right


def number_question(
    qid: str, prompt: str, labels: Sequence[str], expected: Sequence[int], why: str, hint: str | None = None
) -> bool | None:
    """Whole numbers to type (e.g. the two sides of a shape), checked against `expected`."""
    st.markdown(prompt)
    _hint(hint)
    cols = st.columns(len(labels))
    given = [
        setting_widget("number_input", label, f"q_{qid}_{n}", col, min_value=0, step=1)
        for n, (col, label) in enumerate(zip(cols, labels))
    ]
    if any(g is None for g in given):
        return None
    right = [int(g) for g in given] == list(expected)
    first_try(qid, right)
    keys = [f"q_{qid}_{n}" for n in range(len(labels))]
    record(qid, keys, [int(g) for g in given], None, right, [" x ".join(map(str, expected))])
    scroll_here(f"q_{qid}")
    shape = " x ".join(str(e) for e in expected)
    (st.success if right else st.error)(("Right: " if right else "Not quite: ") + f"{shape}. " + why)
    return right


def first_answers() -> dict[str, bool]:
    """Each answered question's record (record_id) -> whether its first answer was right."""
    return dict(st.session_state.get("lesson_first", {}))


def lesson_score() -> tuple[int, int]:
    """(questions right at the first try, questions answered) in this session."""
    first = st.session_state.get("lesson_first", {})
    return sum(first.values()), len(first)


def go_to_step(to: str) -> None:
    """The lesson's Back and Next buttons: open the step with key `to` at its top."""
    st.session_state["step"] = to
    st.session_state["lesson_moves"] = st.session_state.get("lesson_moves", 0) + 1  # each move opens at the top
    scroll_here_done()


def reset_lesson() -> None:
    """Forget the answers and go back to step 1 (a class's student keeps the score: the first answers)."""
    ss = st.session_state
    for key in quiz_keys():
        del ss[key]
    ss["lesson_first"] = {}
    ss["step"] = SETTINGS["step"].default
    if seat_token():  # in a class the score is the class's record of first answers: it stays
        try:
            restore_score()
        except TROUBLE:
            pass
