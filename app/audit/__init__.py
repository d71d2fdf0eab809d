"""The audit trail (issue 23): who changed what and when, hash-chained so that an edit of the
past shows (trail.py writes it, services.py reads and checks it, cli.py is the operator's)."""

from app.audit.trail import init_app, link_values, note

__all__ = ["init_app", "link_values", "note"]
