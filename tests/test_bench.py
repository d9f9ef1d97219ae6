"""A bench measures the checkout it belongs to: run from a second checkout (an A/B of two commits),
it imports that checkout's app and packages, not the ones the editable install points at. And
bench_firstpaint's profile split gives the known answer on a made-up profile."""

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
    probe.write_text("import sys, common, livetest, mha\nprint(sys.path[0], livetest.__file__, mha.__file__)\n")
    out = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(tmp_path), str(tmp_path / "livetest" / "__init__.py"), str(tmp_path / "mha" / "__init__.py")]


def names(node: ast.AST) -> set[str]:
    """The top-level module names an import statement imports (empty for anything else)."""
    if isinstance(node, ast.Import):
        return {a.name.split(".")[0] for a in node.names}
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return {node.module.split(".")[0]}
    return set()


def test_every_bench_imports_common_at_its_top_before_the_project():
    for path in sorted((ROOT / "bench").glob("bench_*.py")):
        tree = ast.parse(path.read_text())
        first = next(((s.lineno, s.col_offset) for s in tree.body if names(s) == {"common"}), None)
        assert first is not None, f"{path.name}: no top-level import of common alone in its statement"
        early = [names(n) & PROJECT for n in ast.walk(tree) if names(n) & PROJECT and (n.lineno, n.col_offset) < first]
        assert not early, f"{path.name} imports {early} before common"


def test_the_first_paint_profile_is_split_by_where_each_sample_ran(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    from bench_firstpaint import BROWSER, FRONTEND, IDLE_TIME, PLOTLY, main_thread

    def node(i, name, url="", children=()):
        return {"id": i, "callFrame": {"functionName": name, "url": url}, "children": list(children)}

    nodes = [
        node(1, "(root)", children=[2, 5, 6, 7]),
        node(2, "render", "http://h/static/js/index.abc.js", [3]),
        node(3, "newPlot", "http://h/static/js/PlotlyChart.D9Z0.js", [4]),
        node(4, "appendChild"),  # a native call under Plotly's code is Plotly's
        node(5, "(idle)"),
        node(6, "(garbage collector)"),
        node(7, "(program)"),
    ]
    # sample i lasts until the next sample in time; the last has no end
    profile = {"nodes": nodes, "samples": [4, 2, 5, 6, 3, 7], "timeDeltas": [0, 1000, 2000, 3000, 4000, 5000]}
    expected = {PLOTLY: 0.006, FRONTEND: 0.002, IDLE_TIME: 0.003, BROWSER: 0.004}
    assert main_thread(profile) == pytest.approx(expected)
    # a delta can go back in time: the samples are taken in time order (5 at 7 ms before 6 at 8 ms)
    profile = {"nodes": nodes, "samples": [4, 2, 6, 5, 7], "timeDeltas": [0, 1000, 7000, -1000, 3000]}
    expected = {PLOTLY: 0.001, FRONTEND: 0.006, IDLE_TIME: 0.001, BROWSER: 0.002}
    assert main_thread(profile) == pytest.approx(expected)
    with pytest.raises(ValueError, match="Plotly"):  # Plotly's file renamed: no silent 0 s
        main_thread({"nodes": nodes[:2] + nodes[4:], "samples": [2, 5], "timeDeltas": [0, 1000]})
