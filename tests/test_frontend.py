"""Every dependency on Streamlit's front end beyond its public API lives in ui/frontend.py; these
tests check it against the installed Streamlit, so an upgrade that breaks one fails here by name."""

from __future__ import annotations

import re

from livetest import ROOT
from ui import frontend


def test_every_styled_test_id_is_listed_and_exists_in_this_streamlit():
    css = (ROOT / "ui" / "style.css").read_text()
    styled = set(re.findall(r'data-testid="([^"]+)"', css))
    assert styled == set(frontend.TEST_IDS)
    bundle = "\n".join(p.read_text(errors="ignore") for p in frontend.static_js().glob("*.js"))
    missing = [t for t in frontend.TEST_IDS if f'"data-testid":`{t}`' not in bundle]
    assert not missing, f"Streamlit no longer renders these test ids (ui/style.css styles them): {missing}"
    projector = set(re.findall(r'data-testid="([^"]+)"', frontend.PROJECTOR))
    assert projector == set(frontend.PROJECTOR_IDS)
    missing = [t for t in frontend.PROJECTOR_IDS if f'"data-testid":`{t}`' not in bundle]
    assert not missing, (
        f"Streamlit no longer renders these test ids (the teacher's view hides or styles them): {missing}"
    )


def test_the_plotly_chart_module_is_found():
    name = frontend.plotly_module()
    assert name is not None, "Streamlit's PlotlyChart.*.js is gone: ui/frontend.preload_plotly imports nothing"
    assert "plotly" in (frontend.static_js() / name).read_text(errors="ignore")[:2_000_000].lower()


def test_nothing_else_names_streamlit_files_or_test_ids():
    """Only ui/frontend.py (and the style sheet it lists) reach into the front end."""
    own = [ROOT / "app.py", *(ROOT / "ui").glob("*.py"), *(ROOT / "app_pages").glob("*.py")]
    reach = [p.name for p in own if p.name != "frontend.py" and re.search(r"data-testid|static/js", p.read_text())]
    assert reach == []
