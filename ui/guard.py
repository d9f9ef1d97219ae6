"""What a raw client may send that a browser never does, made harmless once per server process.

Streamlit trusts its own front end: a script that speaks its WebSocket protocol can send a
`clear_cache` message (which clears every cached resource, the shared model included, for every
session) and any value for any widget (infinity to a number box, an integer or a string where
the box expects the other, an index past a radio's options), which the widget's deserializer
turns into a traceback on the page. Here a `clear_cache` message clears nothing (this app has no
menu item that sends it), and a widget value the widget's own deserializer cannot read, or a
number that is not finite, is dropped: the widget shows its default, as on a first visit.

And every session's first message names the main script by its full path on the server
(NewSession.main_script_path): it goes out as the file's name only (the front end only shows it).
Installed before the first session by `python -m ui.launch` (every deployment's command); under a
plain `streamlit run` (Community Cloud, whose path is its public repository's), by app.py's first run.
"""

from __future__ import annotations

import functools
import logging
import math
import os

log = logging.getLogger("mha.guard")
NUMBERS = {"int_value", "double_value"}  # a number box sends either, whatever its declared type


def _finite(proto) -> bool:
    field = proto.WhichOneof("value")
    if field == "double_value":
        return math.isfinite(proto.double_value)
    if field == "double_array_value":
        return all(math.isfinite(v) for v in proto.double_array_value.data)
    return True


@functools.cache
def install() -> None:
    """Patch Streamlit's session (clear_cache) and widget-state mapping (bad values), once."""
    from streamlit.runtime.app_session import AppSession
    from streamlit.runtime.state.session_state import Value, WStates

    def no_clear_cache(self) -> None:
        log.warning("a client asked to clear every cache: ignored")

    AppSession._handle_clear_cache_request = no_clear_cache

    new_session = AppSession._create_new_session_message

    def no_server_path(self, *args, **kwargs):
        msg = new_session(self, *args, **kwargs)
        msg.new_session.main_script_path = os.path.basename(msg.new_session.main_script_path)
        return msg

    AppSession._create_new_session_message = no_server_path

    read = WStates.__getitem__

    def checked(self, k: str):
        wstate = self.states.get(k)
        metadata = self.widget_metadata.get(k)
        if wstate is None or isinstance(wstate, Value) or metadata is None:
            return read(self, k)
        field = wstate.value.WhichOneof("value")
        if field is None:  # no value (a browser sends that for an untouched widget): Streamlit's own default
            return read(self, k)
        try:
            declared = metadata.value_type
            if declared is not None and field != declared and {field, declared} - NUMBERS:
                raise TypeError(f"a {field} for a widget of {metadata.value_type}")
            if not _finite(wstate.value):
                raise ValueError("not a finite number")
            return read(self, k)
        except Exception as e:  # noqa: BLE001 (whatever the deserializer raised: the value is not the widget's)
            log.warning("dropped a value for widget %s that it cannot take: %s", k[:80], e)
            default = metadata.deserializer(None)
            self.states[k] = Value(default)  # replaced, not deleted: callers iterate over the states
            return default

    WStates.__getitem__ = checked
