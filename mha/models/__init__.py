"""Loaded models: each family in its own module behind one interface (family.py), their traits, the
registry and the allow-list."""
