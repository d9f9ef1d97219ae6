"""A real Streamlit server and a real Chromium for the browser tests and the load bench.

Everything stays on the loopback interface: the server binds 127.0.0.1 on a free port, and
Chromium starts with its background networking off.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the repository, where app.py is
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
# what a browser test waits for the app at most (ms): sized for a busy 2-core machine (a suite
# beside another), never a measure of speed (bench/ measures that). Tests wait for IDLE or a widget.
DEADLINE_MS = 180_000
BUSY = '[data-testid="stApp"]:not([data-test-script-state="notRunning"])'


def chromium() -> str | None:
    """Debian's chromium, or None where it is not installed."""
    return shutil.which("chromium")


def low_priority_chromium() -> str:
    """Debian's chromium behind a wrapper that starts it at the lowest CPU priority (nice 19): the
    load benches' browsers share this machine's cores with the server they measure (on Streamlit
    Cloud or a school's server they run on the users' machines). SystemExit if not installed."""
    exe = chromium()
    if exe is None:
        raise SystemExit("chromium not found: apt-get install -y chromium")
    wrapper = Path("/tmp/mha_nice_chromium")
    wrapper.write_text(f'#!/bin/sh\nexec nice -n 19 "{exe}" "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


@dataclass
class Server:
    url: str
    log: Path
    process: subprocess.Popen


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running(
    proc: subprocess.Popen, health: str, timeout: float, why: Callable[[], str], expect: bytes | None = None
) -> Iterator[None]:
    """`proc` until the block ends (then terminated, killed after 10 s), once `health` answers
    (with `expect`, if given; polled; RuntimeError with why() if it does not in `timeout` s or the
    process exits)."""
    try:
        deadline = time.time() + timeout
        while True:
            try:
                body = urllib.request.urlopen(health, timeout=2).read()
                if expect is None or body == expect:
                    break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError(why()) from None
                time.sleep(0.2)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def streamlit_server(
    env: dict[str, str] | None = None, timeout: float = 90, script: str = "app.py"
) -> Iterator[Server]:
    """`streamlit run app.py` (or another `script`, relative to the repository) on a free loopback
    port, offline; stopped on exit.

    env: extra environment variables. Raises RuntimeError if the server is not healthy in time.
    """
    port = free_port()
    log = Path(tempfile.mkstemp(prefix="mha_server_", suffix=".log")[1])
    # a server warms the bundled model like a deployed one (the test process itself does not)
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MHA_WARM": "1"}
    full_env |= {"MHA_CLASS_PURGE_EVERY": "600", **(env or {})}  # a server purges like a deployed one
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ui.launch",  # as every deployment starts it: streamlit run, the guard installed first
                "run",
                script,
                "--server.headless",
                "true",
                "--server.port",
                str(port),
                "--server.address",
                "127.0.0.1",
            ],
            cwd=ROOT,
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    why = lambda: f"streamlit did not start: {log.read_text()[-2000:]}"  # noqa: E731
    with running(proc, f"{url}/_stcore/health", timeout, why, expect=b"ok"):
        yield Server(url, log, proc)


@dataclass
class Proxy:
    url: str
    logs: Path  # access.log: one line per request, "time cookie "uri" status upstream"
    process: subprocess.Popen

    def served(self) -> list[tuple[str, str, str]]:
        """(sticky cookie, request URI, replica address) of every request logged so far; a
        WebSocket is logged when it closes."""
        rows = []
        for line in (self.logs / "access.log").read_text().splitlines():
            _time, cookie, uri, _status, upstream = line.split(" ", 4)
            rows.append((cookie, uri.strip('"'), upstream))
        return rows


def nginx_config(listen: str, upstreams: list[str], logs: Path) -> str:
    """deploy/nginx.conf with its placeholders filled: nginx on `listen` in front of the replicas
    `upstreams` ("host:port"), logs and temporary files in `logs`."""
    servers = " ".join(f"server {u} max_fails=1 fail_timeout=10s;" for u in upstreams)
    text = (ROOT / "deploy" / "nginx.conf").read_text()
    for key, value in (("__LISTEN__", listen), ("__UPSTREAMS__", servers), ("__LOGS__", str(logs))):
        text = text.replace(key, value)
    # the tests' nginx alone names the replica that answered (a deployed one says it in access.log only)
    cookie = '        add_header Set-Cookie "mha_replica=$mha_key; Path=/; HttpOnly; SameSite=Lax" always;\n'
    text = text.replace(cookie, cookie + "        add_header X-MHA-Replica $upstream_addr always;\n")
    return text.replace("__PID__", str(logs / "nginx.pid"))


@contextlib.contextmanager
def nginx_proxy(upstreams: list[str], timeout: float = 20) -> Iterator[Proxy]:
    """Debian's nginx with deploy/nginx.conf on a free loopback port in front of `upstreams`."""
    port = free_port()
    logs = Path(tempfile.mkdtemp(prefix="mha_nginx_"))
    logs.chmod(0o777)  # nginx's workers (user nobody when started as root) write temporary files here
    (logs / "nginx.conf").write_text(nginx_config(f"127.0.0.1:{port}", upstreams, logs))
    proc = subprocess.Popen(
        [
            shutil.which("nginx") or "nginx",
            "-e",
            str(logs / "error.log"),
            "-c",
            str(logs / "nginx.conf"),
            "-g",
            "daemon off;",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    why = lambda: f"nginx did not start: {(logs / 'error.log').read_text()[-2000:]}"  # noqa: E731
    with running(proc, f"{url}/_stcore/health", timeout, why):
        yield Proxy(url, logs, proc)


def memory_mb(pid: int) -> tuple[float, float]:
    """(current RSS, peak RSS) of a process in MB, from /proc (Linux)."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, every thread) a process has used so far, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime: fields 14, 15


def fresh_page(browser, viewport: dict | None = None) -> tuple:
    """A page in a new browser context (nothing cached: a first visit), and the list that the
    sizes of the app's websocket messages to it are appended to (bytes)."""
    context = browser.new_context(viewport=viewport or {"width": 1400, "height": 1000})
    page = context.new_page()
    frames: list[int] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda f: frames.append(len(f) if f else 0)))
    return page, frames


def wait_idle(page, timeout: float = 90_000) -> float:
    """Seconds until the run the last action started (if it is seen starting) has finished."""
    t0 = time.perf_counter()
    try:
        page.wait_for_selector(BUSY, timeout=1500)
    except Exception:
        pass  # it finished before we looked, or nothing was rerun
    page.wait_for_selector(IDLE, timeout=timeout)
    return time.perf_counter() - t0


async def settle(page, timeout: float = 180_000) -> float:
    """wait_idle for Playwright's async API."""
    t0 = time.perf_counter()
    try:
        await page.wait_for_selector(BUSY, timeout=1500)
    except Exception:
        pass
    await page.wait_for_selector(IDLE, timeout=timeout)
    return time.perf_counter() - t0
