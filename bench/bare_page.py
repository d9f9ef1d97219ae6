"""The reference for bench/bench_firstpaint.py: a bare Streamlit page holding one small Plotly chart."""

import plotly.graph_objects as go
import streamlit as st

st.title("A bare page")
st.plotly_chart(go.Figure(go.Bar(x=["a", "b", "c"], y=[1, 3, 2])))
