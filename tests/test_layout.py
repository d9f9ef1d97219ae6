"""The codebase's shape: imports run only pages -> ui -> classroom -> mha (and app.py -> ui); a page imports
only ui, mha and streamlit; the engine never imports Streamlit; no module exceeds 500 lines; one
list of pages; the lesson a table of steps; docs/architecture.md's layout names every module."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

from livetest import ROOT
from ui.pages import PAGES


def imported(path) -> set[str]:
    """Top-level names of every module a file imports (absolute imports; relative ones are its own package)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


OURS = {"mha", "ui", "app_pages", "app", "livetest", "classroom"}


MAX_LINES = 500


def test_imports_run_only_pages_to_ui_to_mha():
    for path in sorted((ROOT / "mha").rglob("*.py")):
        assert imported(path) & (OURS | {"streamlit"}) <= {"mha"}, path.name
    for path in sorted((ROOT / "classroom").rglob("*.py")):  # class mode's data: the engine's names, no Streamlit
        assert imported(path) & (OURS | {"streamlit"}) <= {"mha", "classroom"}, path.name
    for path in sorted((ROOT / "ui").glob("*.py")):
        assert imported(path) & OURS <= {"mha", "ui", "classroom"}, path.name
    for path in sorted((ROOT / "app_pages").glob("*.py")):
        assert imported(path) <= {"__future__", "mha", "ui", "streamlit"}, (path.name, imported(path))
    assert imported(ROOT / "app.py") & OURS == {"ui"}


LAYERS = {  # inside mha/: each subpackage imports only those below it (and itself)
    "core": set(),
    "models": {"core"},
    "tasks": {"core", "models"},
    "analyses": {"core", "models"},
    "studies": {"core", "models", "tasks", "analyses"},
    "plots": {"core", "models", "tasks", "analyses", "studies"},
    "lesson": {"core", "models", "tasks", "analyses", "studies", "plots"},
}


def test_the_engine_imports_one_way_by_concern():
    """mha/core imports nothing of ours, mha/models only core, and so on up (LAYERS)."""
    import ast

    for package, below in LAYERS.items():
        for path in sorted((ROOT / "mha" / package).rglob("*.py")):
            found = set()
            for node in ast.walk(ast.parse(path.read_text())):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
                found |= {n.split(".")[1] for n in names if n.startswith("mha.") and n.count(".") >= 1}
            assert found - {package} <= below, (path.relative_to(ROOT), found - {package} - below)


def test_no_module_exceeds_500_lines():
    files = [p for d in ("mha", "ui", "app_pages", "classroom") for p in (ROOT / d).rglob("*.py")]
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in [*files, ROOT / "app.py"]}
    assert len(sizes) > 50 and all(n > 0 for n in sizes.values())
    assert {p: n for p, n in sizes.items() if n > MAX_LINES} == {}


def test_importing_mha_does_not_import_streamlit():
    code = (
        "import sys, mha, mha.models.bert, mha.core.attention, mha.analyses.build, mha.analyses.collapse, "
        "mha.analyses.atlas, mha.analyses.experiment, mha.plots; "
        "assert 'streamlit' not in sys.modules, 'streamlit imported'; print('ok')"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, env=os.environ)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok"


def test_one_list_of_pages_matches_the_folder():
    files = sorted(p.name for p in (ROOT / "app_pages").glob("*.py"))
    assert sorted(p.file for p in PAGES) == files
    assert not (ROOT / "pages").exists()  # would switch Streamlit to its legacy multipage mode


def test_pyproject_lists_the_requirements():
    import tomllib

    from packaging.requirements import Requirement

    lines = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    runtime = {str(Requirement(line)) for line in lines if line and not line.startswith("-")}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert runtime == {str(Requirement(d)) for d in project}
    assert any(line.startswith("--find-links https://download.pytorch.org/whl/cpu") for line in lines)


def test_the_image_is_built_from_the_checkout_minus_what_git_ignores():
    """deploy/Dockerfile copies the repository root: .dockerignore leaves out all that .gitignore
    ignores (a working checkout's .venv is 2.1 GB) and git's own history. A .gitignore pattern
    with no slash but a trailing one matches at every depth; in .dockerignore that is **/pattern."""
    patterns = lambda name: {  # noqa: E731
        line.strip() for line in (ROOT / name).read_text().splitlines() if line.strip() and not line.startswith("#")
    }
    every_depth = lambda p: p if "/" in p.rstrip("/") else f"**/{p}"  # noqa: E731
    assert {every_depth(p) for p in patterns(".gitignore")} | {".git/"} <= patterns(".dockerignore")


def test_every_runtime_dependency_is_pinned_exactly():
    """A deploy installs what the suite passed on: each requirement names one version (==)."""
    from packaging.requirements import Requirement

    lines = [line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    reqs = [Requirement(line) for line in lines if line and not line.startswith("-")]
    loose = [str(r) for r in reqs if [s.operator for s in r.specifier] != ["=="]]
    assert reqs and not loose, loose


def test_the_lesson_is_a_table_of_steps_with_short_functions():
    """A step is one unit (mha.lesson.steps.Step plus its drawing, ui.lesson_steps.DRAW[key]); the lesson
    page and the steps' drawings have no function or top-level block of 80 lines or more."""
    from mha.lesson import steps
    from ui.lesson_steps import DRAW

    assert [s.key for s in steps.STEPS] == list(DRAW)
    drawn = (ROOT / "ui" / "lesson_steps.py").read_text()
    for step in steps.STEPS:  # each question the step records is asked by its drawing, by that name
        assert all(f'{{c.tag}}-{name}"' in drawn for name in step.questions), step.key
    for name in ("app_pages/lesson.py", "ui/lesson_steps.py"):
        tree = ast.parse((ROOT / name).read_text())
        blocks = [*tree.body, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))]
        longest = max(n.end_lineno - n.lineno + 1 for n in blocks)
        assert 10 < longest < 80, (name, longest)


def test_the_readme_layout_names_every_module():
    """docs/architecture.md's Layout section names every module of ui/ and mha/ (plots/ by family),
    and no module that is not there."""
    readme = (ROOT / "docs" / "architecture.md").read_text()
    layout = readme[readme.index("## Layout") :]
    layout = layout[: layout.index("\n## ", 5)] if "\n## " in layout[5:] else layout
    named = set(re.findall(r"`(\w+)\.py`", layout))
    engine = [p for p in (ROOT / "mha").rglob("*.py") if p.parent.name != "plots"]
    files = {p.stem for p in [*(ROOT / "ui").glob("*.py"), *engine] if p.stem != "__init__"}
    assert files - named == set(), "modules missing from the layout"
    extra = named - files - {"app", "heads_study"}
    assert extra == set(), "the layout names modules that do not exist"
    plots = {p.stem for p in (ROOT / "mha" / "plots").glob("*.py") if p.stem != "__init__"}
    assert {p for p in plots if f"`{p}`" not in layout} == set()
