"""The school's way without Docker (deploy/school.sh): the nginx configuration it writes for N
replicas passes `nginx -t`, names each replica once, and is deploy/nginx.conf with its ports
filled in; more than one replica without PostgreSQL is refused (SQLite is one server's file);
and the real thing: two replicas and nginx under supervisord, a replica killed with kill -9 is
back within 30 s, `stop` leaves no process behind (with supervisord itself killed too), and
the address students type is the public one."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys

import pytest

from livetest import ROOT

SCRIPT = ROOT / "deploy" / "school.sh"


def test_the_script_writes_a_valid_nginx_config_for_n_replicas(tmp_path):
    if shutil.which("nginx") is None:
        why = "Debian's nginx is not installed: apt-get install -y nginx (.ci/run does)"
        pytest.fail(why) if os.environ.get("CI", "").lower() == "true" else pytest.skip(why)
    env = {**os.environ, "MHA_SCHOOL_DIR": str(tmp_path)}
    conf = subprocess.run([SCRIPT, "config", "3", "18080"], env=env, capture_output=True, text=True, check=True).stdout
    assert [f"127.0.0.1:{8501 + i}" in conf for i in range(4)] == [True, True, True, False]
    assert "listen 0.0.0.0:18080;" in conf and "__" not in conf.split("worker_processes")[1]
    assert "hash $mha_key consistent;" in conf  # the same sticky upstream as deploy/nginx.conf
    (tmp_path / "nginx.conf").write_text(conf)
    checked = subprocess.run(
        ["nginx", "-t", "-e", str(tmp_path / "error.log"), "-c", str(tmp_path / "nginx.conf")],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr


def test_more_than_one_replica_needs_postgresql(tmp_path):
    env = {**os.environ, "MHA_SCHOOL_DIR": str(tmp_path), "MHA_CLASS_DB": ""}
    done = subprocess.run([SCRIPT, "start", "2"], env=env, capture_output=True, text=True)
    assert done.returncode == 2 and "PostgreSQL" in done.stderr
    assert not list(tmp_path.glob("replica-*"))  # nothing was started


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not open(f"/proc/{pid}/stat").read().split()[2] == "Z"


def _pids(env: dict) -> dict[str, int]:
    out = subprocess.run([SCRIPT, "status"], env=env, capture_output=True, text=True).stdout
    found = re.findall(r"^(\S+)\s+RUNNING\s+pid (\d+)", out, re.M)
    return {name: int(pid) for name, pid in found}


def test_the_school_server_restarts_a_killed_replica_and_stops_clean(tmp_path):
    """deploy/school.sh start 2 with PostgreSQL: kill -9 one replica, and supervisord has it
    answering again within 30 s; `stop` after supervisord itself was killed (kill -9) still stops
    every replica and nginx."""
    import signal
    import time
    import urllib.request

    from test_class_browser import postgres_or_skip

    from livetest import free_port

    for tool in ("nginx", "curl"):
        if shutil.which(tool) is None:
            why = f"{tool} is not installed (.ci/run installs it)"
            pytest.fail(why) if os.environ.get("CI", "").lower() == "true" else pytest.skip(why)
    first, port = free_port(), free_port()
    while abs(first - port) < 3 or not all(_free(first + i) for i in range(2)):
        first = free_port()
    env = {
        **os.environ,
        "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}",  # the app's environment, active
        "MHA_SCHOOL_DIR": str(tmp_path / "school"),
        "MHA_SCHOOL_ENV": str(tmp_path / "none.env"),
        "MHA_FIRST_PORT": str(first),
        "MHA_CLASS_DB": postgres_or_skip(),
        "MHA_PUBLIC_URL": "http://10.11.12.13:8080",
        "MHA_WARM": "0",
    }
    started = subprocess.run([SCRIPT, "start", "2", str(port)], env=env, capture_output=True, text=True, timeout=300)
    try:
        assert started.returncode == 0, started.stderr + started.stdout
        assert "students type: http://10.11.12.13:8080" in started.stdout
        pids = _pids(env)
        assert set(pids) == {"replica-0", "replica-1", "nginx"}, pids
        health = f"http://127.0.0.1:{port}/_stcore/health"
        with urllib.request.urlopen(health, timeout=10) as r:  # no version, no replica's port
            assert r.read() == b"ok" and r.headers["Server"] == "nginx" and "X-MHA-Replica" not in r.headers
        os.kill(pids["replica-0"], signal.SIGKILL)
        t0 = time.time()
        while time.time() - t0 < 30:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{first}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            time.sleep(0.5)
        back = time.time() - t0
        assert back < 30, back
        for _ in range(20):  # supervisord calls it RUNNING once it has lived startsecs (3 s)
            if "replica-0" in _pids(env):
                break
            time.sleep(0.5)
        assert _pids(env)["replica-0"] != pids["replica-0"]
        # after a code update: `restart` takes the replicas down one at a time, nginx answers throughout
        before = _pids(env)
        import threading

        refused, done = [], threading.Event()

        def poll() -> None:
            while not done.is_set():
                try:
                    urllib.request.urlopen(health, timeout=5).read()
                except OSError as e:
                    refused.append(str(e))
                time.sleep(0.3)

        poller = threading.Thread(target=poll)
        poller.start()
        restarted = subprocess.run([SCRIPT, "restart"], env=env, capture_output=True, text=True, timeout=200)
        done.set()
        poller.join()
        assert restarted.returncode == 0 and restarted.stdout.count("restarted replica-") == 2, restarted
        assert refused == [], refused
        after = _pids(env)
        assert after["replica-0"] != before["replica-0"] and after["replica-1"] != before["replica-1"]
        everything = list(_pids(env).values())
        supervisor = int((tmp_path / "school" / "supervisord.pid").read_text())
        os.kill(supervisor, signal.SIGKILL)  # the supervisor dies too: its children are orphans now
        time.sleep(1)
    finally:
        stopped = subprocess.run([SCRIPT, "stop"], env=env, capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    time.sleep(2)
    assert not [p for p in everything if _alive(p)], everything
    assert all(_free(first + i) for i in range(2)) and _free(port)
    assert stat.S_IMODE((tmp_path / "school").stat().st_mode) == 0o711
    logs = [f for f in (tmp_path / "school").iterdir() if f.suffix in (".log", ".out")]
    assert {"supervisord.log", "replica-0.log", "replica-1.log", "error.log", "access.log"} <= {f.name for f in logs}
    modes = {f.name: oct(stat.S_IMODE(f.stat().st_mode)) for f in logs}
    assert all(stat.S_IMODE(f.stat().st_mode) & 0o137 == 0 for f in logs), modes  # 0640 at most


def _free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_postgres_keeps_an_existing_role_as_it_is(tmp_path):
    """deploy/school.sh postgres on a cluster whose role mha exists (the tests' own, password "mha"):
    without its password it refuses and says how; with a wrong one it refuses; with the right one it
    saves a URL with the cluster's host and port. The role's password is never changed."""
    from test_class_browser import postgres_or_skip

    url = postgres_or_skip()
    if os.geteuid() != 0 or shutil.which("pg_lsclusters") is None:
        pytest.skip("needs root and Debian's PostgreSQL (.ci/run has both)")
    import sqlalchemy as sa

    settings = tmp_path / "mha.env"
    base = {**os.environ, "MHA_SCHOOL_ENV": str(settings), "MHA_SCHOOL_DIR": str(tmp_path)}
    base.pop("MHA_DB_PASSWORD", None)

    def run(**extra):
        return subprocess.run([SCRIPT, "postgres"], env=base | extra, capture_output=True, text=True, timeout=120)

    def still_works() -> bool:
        with sa.create_engine(url).connect() as conn:  # the tests' URL, with the password it always had
            return conn.execute(sa.text("SELECT 1")).scalar_one() == 1

    if not still_works():
        pytest.skip("the tests' database does not answer")
    asked = run()
    assert asked.returncode == 2 and "set MHA_DB_PASSWORD" in asked.stderr and "MHA_DB_RESET=1" in asked.stderr
    wrong = run(MHA_DB_PASSWORD="not-its-password")
    assert wrong.returncode == 2 and "not the password of the role mha" in wrong.stderr, wrong.stderr
    assert not settings.exists() and still_works()
    password = sa.engine.make_url(url).password
    kept = run(MHA_DB_PASSWORD=password, MHA_DB_HOST="127.0.0.1", MHA_DB_PORT=str(sa.engine.make_url(url).port))
    assert kept.returncode == 0, kept.stderr
    saved = settings.read_text().strip()
    assert saved == f"MHA_CLASS_DB=postgresql+psycopg://mha:{password}@127.0.0.1:{sa.engine.make_url(url).port}/mha"
    assert stat.S_IMODE(settings.stat().st_mode) == 0o600 and still_works()
    again = run()  # the saved password, a second time: kept, still no change
    assert again.returncode == 0 and settings.read_text().strip() == saved and still_works()
    bad = run(MHA_DB_PORT="5432; rm -rf /")
    assert bad.returncode == 2 and "MHA_DB_PORT" in bad.stderr
