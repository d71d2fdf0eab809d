"""WSGI entry point: `flask --app wsgi ...` and `waitress-serve wsgi:app` load `app` from here."""

import sys

from app import create_app
from app.config import ConfigError

try:
    app = create_app()
except ConfigError as exc:
    print(f"configuration error: {exc}", file=sys.stderr)
    raise SystemExit(2) from None
