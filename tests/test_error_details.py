"""No server path reaches a student (issue 59): an uncaught error is shown as Streamlit's generic
message (client.showErrorDetails = "none"), never its type, text or traceback, and the session's
first message names the script without its folder (ui.guard). Provoked through a real server
started as deployments start it (ui.launch), with the project's configuration, on the first
session it serves, and read from what a real browser received (the page and every WebSocket
frame); and every deployment sets it."""

from __future__ import annotations

import os
import tomllib

import pytest

from livetest import CHROMIUM_FLAGS, DEADLINE_MS, ROOT, chromium, streamlit_server

RAISES = """
import streamlit as st
st.title("About to fail")
open({path!r}).read()  # FileNotFoundError, its message names a server path
"""


def test_every_deployment_turns_error_details_off():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["client"]["showErrorDetails"] == "none"  # Community Cloud, a checkout, the image
    assert '"--client.showErrorDetails=none"' in (ROOT / "deploy" / "Dockerfile").read_text()
    for name in ("Dockerfile", "mha-explorer@.service", "school.sh"):  # the guard is in before the first session
        assert "ui.launch" in (ROOT / "deploy" / name).read_text(), name
    assert "--client.showErrorDetails none" in (ROOT / "deploy" / "mha-explorer@.service").read_text()
    assert "--client.showErrorDetails none" in (ROOT / "deploy" / "school.sh").read_text()
    assert "STREAMLIT_CLIENT_SHOW_ERROR_DETAILS: none" in (ROOT / "deploy" / "compose.yaml").read_text()


def test_an_error_through_a_real_server_shows_no_path(tmp_path):
    exe = chromium()
    if exe is None:
        why = "Debian's chromium is not installed (.ci/run installs it)"
        pytest.fail(why) if os.environ.get("CI", "").lower() == "true" else pytest.skip(why)
    from playwright.sync_api import sync_playwright

    secret = str(ROOT / "no-such-folder" / "secret.txt")
    script = tmp_path / "raises.py"
    script.write_text(RAISES.format(path=secret))
    frames: list[bytes] = []
    with streamlit_server(env={"MHA_WARM": "0"}, script=str(script)) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_FLAGS)
        page = browser.new_page()
        keep = lambda f: frames.append(f if isinstance(f, bytes) else f.encode())  # noqa: E731
        page.on("websocket", lambda ws: ws.on("framereceived", keep))
        page.goto(server.url)
        page.wait_for_selector('[data-testid="stException"]', timeout=DEADLINE_MS)
        shown = page.inner_text("body")
        browser.close()
        logged = server.log.read_text()
    assert "About to fail" in shown  # the script ran, and failed after its title
    received = b"".join(frames)
    for leak in (str(ROOT), str(tmp_path), "secret.txt", "FileNotFoundError", "Traceback", "line 4"):
        assert leak not in shown, (leak, shown)
        assert leak.encode() not in received, leak
    assert secret in logged  # the server's own log keeps what the people running it need
