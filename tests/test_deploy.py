"""The school's way without Docker (deploy/school.sh): the nginx configuration it writes for N
replicas passes `nginx -t`, names each replica once, and is deploy/nginx.conf with its ports
filled in; more than one replica without PostgreSQL is refused (SQLite is one server's file)."""

from __future__ import annotations

import os
import shutil
import subprocess

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
    assert "listen 127.0.0.1:18080;" in conf and "__" not in conf.split("worker_processes")[1]
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
