"""Class: join a teacher's class with its code, or start one and get the teacher's link (the
teacher view opens with that link: ui.teacher)."""

import streamlit as st

import ui
from ui import classroom, teacher

secret = teacher.token()
if secret is not None:
    teacher.view(secret)
    st.stop()
teacher.forget_cookie()  # after leaving the teacher view or ending the class

ui.show_notices()
st.title("Class")
seat = st.session_state.get("_class_name")
if seat:
    code, nickname = seat
    st.success(f"You are in class {code} as {ui.literal(nickname, 24)}. Your answers are kept for your teacher.")
    st.caption(f"Not {ui.literal(nickname, 24)}? Leave the class, then join with your own nickname.")
    st.button("Go to the class's step", on_click=classroom.back, key="class_go", type="primary")
    if st.button("Leave the class", key="class_leave"):
        classroom.leave(
            "You left the class: this is the app on your own again. This browser keeps nothing of your seat: "
            "joining again gives you a new seat, with another nickname (your teacher keeps your answers)."
        )
        st.rerun()
    st.stop()

join_col, teach_col = st.columns(2)
with join_col:
    st.header("Join a class")
    with st.form("class_join"):
        # no max_chars: a longer paste would be emptied in the browser, silently; the server says why instead
        code = st.text_input("Class code", value=st.query_params.get("join", "")[:32], key="class_code")
        nickname = st.text_input(
            "Nickname (optional)",
            key="class_nickname",
            help=f"Up to {classroom.NICKNAME_MAX} letters, digits and spaces. No other data is asked.",
        )
        joined = st.form_submit_button("Join", type="primary")
    if joined:
        try:
            seat = classroom.join(code, nickname)
        except classroom.TROUBLE as e:
            st.error(classroom.db_trouble(e))
        else:
            st.rerun()
with teach_col:
    st.header("Teach a class")
    mine = teacher.kept_class()  # this browser's cookie of a class it teaches, still open
    if mine:
        label = f"Back to your class {mine[:4]} {mine[4:]}"
        st.button(label, on_click=teacher.reopen, key="class_reopen", type="primary")
    with st.expander("Open a class you teach", icon=":material/key:"):
        with st.form("class_open"):
            key = st.text_input("Teacher key", type="password", key="class_key", help="Shown in your teacher view.")
            opened = st.form_submit_button("Open the teacher view")
    if opened:  # the message outside the expander: it stays in view
        try:
            teacher.open_view(key)
        except classroom.TROUBLE as e:
            st.error(classroom.db_trouble(e))
        else:
            st.rerun()
    inp = ui.inputs()
    if not inp.text.strip():
        st.info("The sidebar's sentence is empty: type one there, and start a class on it.")
        st.stop()
    st.markdown(
        f"Starts a class on the sidebar's sentence (*{ui.literal(inp.text, 60)}*) and model at step 1; you "
        "can pin another from your teacher view. You get a code for students and a view for you alone."
    )
    if st.button("Start a class", key="class_start"):
        try:
            secret = classroom.start(inp)
        except classroom.TROUBLE as e:
            st.error(classroom.db_trouble(e))
        else:
            st.session_state["_teacher"] = secret  # the address shows teach=1, never the secret
            st.session_state.pop("_teacher_ended", None)
            st.query_params["teach"] = "1"
            st.rerun()
