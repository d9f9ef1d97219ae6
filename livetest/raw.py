"""A raw Streamlit client for attack tests: what a script sends where a browser would not (any
header, any cookie, any widget value, any BackMsg), over the app's real WebSocket.

    with raw.Session(server.url, headers={"X-Forwarded-For": "10.0.0.7"}) as s:
        s.run("classroom", query="join=ABCD")
        s.set("Class code", "ABCDEFGH"); s.set("Nickname (optional)", "Sam")
        s.click("Join")
        s.texts()  # every text element the last run drew
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.sync.client import ClientConnection, connect


@dataclass
class Widget:
    kind: str  # the element's proto field: "text_input", "button", "radio", ...
    id: str
    label: str
    options: list[str] = field(default_factory=list)


class Session:
    """One session on `url`'s WebSocket, with the given extra headers and cookies."""

    def __init__(self, url: str, headers: dict[str, str] | None = None, cookies: dict[str, str] | None = None):
        self.url = url.replace("http://", "ws://").rstrip("/") + "/_stcore/stream"
        self.headers = dict(headers or {})
        if cookies:
            self.headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in cookies.items())
        self.ws: ClientConnection | None = None
        self.widgets: dict[str, Widget] = {}
        self.states: dict[str, tuple[str, object]] = {}  # id -> (proto field, value), sent at every rerun
        self.elements: list[tuple[str, object]] = []  # (kind, element proto) of the last run
        self.page = ""
        self.query = ""
        self.closed_with: int | None = None
        self.received: list[tuple[str | None, str, bool]] = []  # (type, hash, cacheable) of every ForwardMsg

    def __enter__(self) -> Session:
        origin = self.url.replace("ws://", "http://").rsplit("/_stcore", 1)[0]
        self._connection = connect(
            self.url,
            subprotocols=["streamlit"],
            additional_headers={"Origin": origin, **self.headers},
            max_size=None,
            open_timeout=20,
        )
        self.ws = self._connection.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.ws is not None:
            self._connection.__exit__(*exc)

    def send(self, msg: BackMsg) -> None:
        self.ws.send(msg.SerializeToString())

    def rerun(self, timeout: float = 90, cached: list[str] | None = None) -> list[tuple[str, object]]:
        """A rerun with this session's page, query and widget states (and `cached`: the hashes of
        the messages this client says it keeps); the elements it drew."""
        msg = BackMsg()
        cs = msg.rerun_script
        cs.cached_message_hashes.extend(cached or [])
        cs.query_string, cs.page_name = self.query, self.page
        for wid, (kind, value) in self.states.items():
            w = cs.widget_states.widgets.add()
            w.id = wid
            if kind == "int_array_value":
                w.int_array_value.data.extend(value)
            elif kind == "double_array_value":
                w.double_array_value.data.extend(value)
            else:
                setattr(w, kind, value)
        self.send(msg)
        self.states = {k: v for k, v in self.states.items() if k != "trigger_value" and v[0] != "trigger_value"}
        return self.receive(timeout)

    def receive(self, timeout: float = 90) -> list[tuple[str, object]]:
        """Read ForwardMsgs until the script run finishes (or the server closes the socket)."""
        self.elements, deadline = [], time.time() + timeout
        started = False
        while time.time() < deadline:
            try:
                data = self.ws.recv(timeout=max(deadline - time.time(), 0.1))
            except TimeoutError:
                break
            except Exception:  # closed by the server
                self.closed_with = getattr(self.ws.protocol.close_rcvd, "code", None)
                break
            fm = ForwardMsg()
            fm.ParseFromString(data)
            kind = fm.WhichOneof("type")
            self.received.append((kind, fm.hash, fm.metadata.cacheable))
            if kind == "new_session":
                started = True
            elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
                el = fm.delta.new_element
                ek = el.WhichOneof("type")
                self.elements.append((ek, getattr(el, ek)))
                proto = getattr(el, ek)
                if hasattr(proto, "id") and getattr(proto, "id", ""):
                    self.widgets[proto.label if hasattr(proto, "label") else proto.id] = Widget(
                        ek, proto.id, getattr(proto, "label", ""), list(getattr(proto, "options", []))
                    )
            elif kind == "script_finished" and started:
                # FINISHED_EARLY_FOR_RERUN (st.rerun(): the next run follows) or a fragment's own run
                # (run_every): not the end of the whole run
                if fm.script_finished in (2, 3):
                    if fm.script_finished == 2:
                        self.elements, started = [], False
                    continue
                break
            elif kind == "navigation":  # the page this run draws (after a st.switch_page too), by its path
                nav = fm.navigation
                paths = {p.page_script_hash: p.url_pathname for p in nav.app_pages}
                self.page = paths.get(nav.page_script_hash, self.page)
            elif kind == "page_info_changed":
                self.query = fm.page_info_changed.query_string
        return self.elements

    def run(self, page: str = "", query: str = "", timeout: float = 90) -> list[tuple[str, object]]:
        """Open `page` with `query` (a fresh run, widget states kept)."""
        self.page, self.query = page, query
        return self.rerun(timeout)

    def set(self, label: str, value: object, kind: str | None = None) -> None:
        """Give the widget labelled `label` (drawn by an earlier run) a value, of the proto field
        `kind` (default: the one a browser would send for that widget)."""
        w = self.widgets[label]
        default = {
            "text_input": "string_value",
            "text_area": "string_value",
            "number_input": "double_value",
            "radio": "string_value",  # the option as shown (Streamlit 1.67)
            "selectbox": "string_value",
            "checkbox": "bool_value",
            "toggle": "bool_value",
            "slider": "double_array_value",
        }.get(w.kind, "string_value")
        self.states[w.id] = (kind or default, value)

    def click(self, label: str, timeout: float = 90) -> list[tuple[str, object]]:
        """Press the button labelled `label` (a trigger for this one rerun)."""
        w = self.widgets[label]
        self.states[w.id] = ("trigger_value", True)
        out = self.rerun(timeout)
        self.states.pop(w.id, None)
        return out

    def texts(self) -> list[str]:
        """The text of every element of the last run that shows text."""
        out = []
        for _kind, proto in self.elements:
            for attr in ("body", "message", "text"):
                value = getattr(proto, attr, None)
                if isinstance(value, str) and value:
                    out.append(value)
                    break
        return out

    def exceptions(self) -> list[str]:
        return [f"{p.type}: {p.message}" for k, p in self.elements if k == "exception"]
