"""WSGI entry point: `flask --app wsgi ...` and `waitress-serve wsgi:app` load `app` from here.
Installed with the package (pyproject.toml), so they find it from any folder."""

import sys

from app import create_app
from app.cli import one_line_errors
from app.config import ConfigError
from app.server import waitress_serve_hosts, warn_when_links_follow_any_host

try:
    app = create_app()
except ConfigError as exc:
    print(f"configuration error: {exc}", file=sys.stderr)
    raise SystemExit(2) from None

# A command that meets an unreachable or unmigrated database says so in one line (exit 1).
sys.excepthook = one_line_errors(app.config)

# `flask serve` says this itself; under `waitress-serve` nothing else knows where it listens.
if (hosts := waitress_serve_hosts(sys.argv)) is not None:
    warn_when_links_follow_any_host(app, hosts)
