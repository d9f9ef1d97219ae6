"""`python -m ui.launch run app.py [streamlit's options]`: Streamlit's own command line, with ui.guard
installed before the first session opens (a plain `streamlit run` installs it at app.py's first run,
after that session's first message went out). Every deployment starts the app this way."""

import sys

from streamlit.web import cli

from ui import guard

if __name__ == "__main__":
    guard.install()
    sys.exit(cli.main())
