"""A bench measures the checkout it belongs to: run from a second checkout (an A/B of two commits),
it imports that checkout's app and packages, not the ones the editable install points at."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys

import pytest

from livetest import ROOT

PROJECT = {"mha", "ui", "livetest", "classroom"}


def test_common_puts_its_own_checkout_first(tmp_path):
    (tmp_path / "bench").mkdir()
    shutil.copy(ROOT / "bench" / "common.py", tmp_path / "bench" / "common.py")
    for package in ("livetest", "mha"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    probe = tmp_path / "bench" / "probe.py"
    probe.write_text("import common\nimport livetest, mha\nprint(livetest.__file__)\nprint(mha.__file__)\n")
    out = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(tmp_path / "livetest" / "__init__.py"), str(tmp_path / "mha" / "__init__.py")]


def test_every_bench_imports_common_before_the_project():
    for path in sorted((ROOT / "bench").glob("bench_*.py")):
        modules = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules += [(node.lineno, a.name.split(".")[0]) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                modules.append((node.lineno, node.module.split(".")[0]))
        ordered = [m for _, m in sorted(modules) if m in PROJECT | {"common"}]
        assert ordered and ordered[0] == "common", f"{path.name} imports {ordered[:1]} before common"


def test_the_first_paint_profile_is_split_by_where_each_sample_ran(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from bench_firstpaint import BROWSER, FRONTEND, IDLE_TIME, PLOTLY, main_thread

    def node(i, name, url="", children=()):
        return {"id": i, "callFrame": {"functionName": name, "url": url}, "children": list(children)}

    profile = {
        "nodes": [
            node(1, "(root)", children=[2, 5, 6, 7]),
            node(2, "render", "http://h/static/js/index.abc.js", [3]),
            node(3, "newPlot", "http://h/static/js/PlotlyChart.D9Z0.js", [4]),
            node(4, "appendChild"),  # a native call under Plotly's code is Plotly's
            node(5, "(idle)"),
            node(6, "(garbage collector)"),
            node(7, "(program)"),
        ],
        # sample i lasts until sample i+1: timeDeltas[i + 1] microseconds; the last has no end
        "samples": [4, 2, 5, 6, 7, 3],
        "timeDeltas": [0, 1000, 2000, 3000, 4000, 5000],
    }
    expected = {PLOTLY: 0.001, FRONTEND: 0.002, IDLE_TIME: 0.003, BROWSER: 0.009}
    assert main_thread(profile) == pytest.approx(expected)
