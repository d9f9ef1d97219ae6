"""The lesson: the seven points of multi-head attention in order, each done by the learner on the
real model, with a question checked against the numbers the engine computed for their sentence.
The steps are mha.lesson.steps.STEPS, each drawn by ui.lesson_steps.DRAW[step.key]."""

import streamlit as st

import ui
from mha.lesson import steps
from ui import lesson_steps

N = len(steps.STEPS)
inp, run, model = ui.page_start()
ss = st.session_state
key = steps.step_of(ss.get("step"))  # a step's key; an old link's number opens the step it named then
if key is None:
    ui.notice(f"The lesson has no step {str(ss.get('step'))[:20]!r}: starting at step 1.")
key = key or steps.KEYS[0]
ss["step"] = key
ui.show_notices()
step = steps.number(key)
current = steps.STEPS[step - 1]


ui.scroll_top(f"lesson-{ss.get('lesson_moves', 0)}")
head_row = st.columns([3, 1.4, 0.6])  # the last column stays empty: Streamlit's header sits over it
head_row[0].title("Lesson: multi-head attention")
score_box = head_row[1].empty()  # filled at the end of the run, after this run's answers
st.progress(step / N, text=f"Step {step} of {N}: {current.title}")
this = lesson_steps.StepContext(inp, run, model, ui.question_tag(inp, key))
st.markdown(current.opening(this.shape))
lesson_steps.DRAW[current.key](this)

b1, _, reset, b2 = st.columns([1, 2.6, 1.4, 1])
back = steps.KEYS[max(step - 2, 0)]
b1.button("← Back", disabled=step == 1, on_click=ui.go_to_step, args=(back,), key="lesson_back", width="stretch")
reset.button("Reset lesson", on_click=ui.reset_lesson, key="lesson_reset", width="stretch")
b2.button(
    "Next →",
    disabled=step == N,
    on_click=ui.go_to_step,
    args=(steps.KEYS[min(step, N - 1)],),
    key="lesson_next",
    type="primary",
    width="stretch",
)
right, answered = ui.lesson_score()  # after every question of this run: the same numbers everywhere
if answered:  # "0 of 0" says nothing, and on a phone it pushed the question below the first screen
    score_box.metric("Right at the first try", f"{right} of {answered}")
if step == N and answered == len(steps.QUESTIONS):
    st.success(
        f"End of the lesson: {right} of {answered} questions right at the first try. Every tool is in the "
        "sidebar; the sentence box works on all of them.",
        icon=":material/school:",
    )
elif step == N:
    st.info(f"{answered} of {len(steps.QUESTIONS)} questions answered: the steps before this one hold the others.")
ui.words(
    "head width",
    "subword pieces",
    "representation subspace",
    "subspace overlap",
    "principal angles",
    "head diversity",
    "attention drift",
    "rescaled mean",
    "distinct maps",
    "entropy / ln T",
    "largest difference between heads",
    "[CLS] and [SEP]",
    "effective number of heads",
    "Jensen-Shannon divergence",
    "nats",
    "score spread",
    "multi-query and grouped-query",
    "K/V cache",
    "mean pooling",
    "uptraining",
)  # after the step: on a phone the question comes first
