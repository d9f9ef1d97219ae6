"""Attention itself: the from-scratch multi-head layer, rotary positions, and the references it is checked against."""
