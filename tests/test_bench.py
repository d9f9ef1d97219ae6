"""A bench measures the checkout it belongs to: run from a second checkout (an A/B of two commits),
it imports that checkout's app and packages, not the ones the editable install points at."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys

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
