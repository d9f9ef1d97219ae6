"""The Streamlit layer: cached engine calls (`cache`), session and URL state with the rerun's
one `Inputs` (`state`), shared widgets and the sidebar (`widgets`), the page list (`pages`) and
per-process setup (`server`). With app.py and app_pages/, the only code that imports streamlit;
the engine, `mha`, never does.
"""

from .cache import (
    cached_alpha_frames,
    cached_collapse,
    cached_ladder,
    cached_layer_maps,
    cached_measures,
    cached_pool,
    cached_pool_runs,
    cached_run,
    cached_spectra,
    cached_sweep,
    cached_token_views,
    cached_whole_model,
    experiments,
    layer_inputs,
    load_model,
    uptrains,
)
from .state import MAX_CHARS, Inputs, inputs, kept, literal, notice, show_notices, sync_url
from .widgets import (
    Sharing,
    current_run,
    ensure_model,
    layer_head,
    model,
    run_or_stop,
    sharing_controls,
    sidebar,
    token_picker,
)

__all__ = [
    "cached_ladder",
    "cached_pool_runs",
    "layer_inputs",
    "uptrains",
    "Sharing",
    "cached_alpha_frames",
    "cached_layer_maps",
    "cached_pool",
    "cached_spectra",
    "sharing_controls",
    "MAX_CHARS",
    "Inputs",
    "cached_collapse",
    "cached_measures",
    "cached_run",
    "cached_sweep",
    "cached_token_views",
    "cached_whole_model",
    "current_run",
    "ensure_model",
    "experiments",
    "inputs",
    "kept",
    "layer_head",
    "literal",
    "load_model",
    "model",
    "notice",
    "run_or_stop",
    "show_notices",
    "sidebar",
    "sync_url",
    "token_picker",
]
