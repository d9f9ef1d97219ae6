"""Measures of attention on a run: head maps, subspaces, collapse under sharing, the sharing ladder,
groups, sinks, the atlas."""
