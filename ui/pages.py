"""The app's pages in navigation order: the one list used by app.py, the tests and the benches.

Pages live in app_pages/, not pages/: a folder named pages/ beside the entrypoint puts Streamlit
into its legacy multipage mode, where a deep link runs the page file alone, without app.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PageSpec:
    """One page: its file under app_pages/, its title and icon in the navigation."""

    file: str
    title: str
    icon: str

    @property
    def path(self) -> str:
        """The script path relative to the repository root (as st.Page and AppTest take it)."""
        return f"app_pages/{self.file}"

    @property
    def url_path(self) -> str:
        """The page's address after the host, e.g. "bert_heads" (Streamlit uses the file name)."""
        return Path(self.file).stem


PAGES = (
    PageSpec("lesson.py", "Lesson", ":material/school:"),
    PageSpec("overview.py", "Overview", ":material/explore:"),
    PageSpec("build.py", "Build it from scratch", ":material/build:"),
    PageSpec("bert_heads.py", "Attention heads", ":material/grid_view:"),
    PageSpec("collapse.py", "Shared Q/K/V: collapse", ":material/call_merge:"),
    PageSpec("subspaces.py", "Subspaces", ":material/scatter_plot:"),
    PageSpec("sharing.py", "What may be shared", ":material/share:"),
    PageSpec("atlas.py", "Head atlas", ":material/map:"),
    PageSpec("why_heads.py", "Why many heads", ":material/model_training:"),
    PageSpec("heads_needed.py", "Do we need every head?", ":material/content_cut:"),
    PageSpec("glossary.py", "Glossary", ":material/menu_book:"),
    PageSpec("classroom.py", "Class", ":material/groups:"),
)
DEFAULT = PAGES[0]
