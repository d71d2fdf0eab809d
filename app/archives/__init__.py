"""A folder as one ZIP: every downloadable record under a path, streamed as stored entries."""

from flask import Blueprint

# Not in autocommit like the other reads: the records are read through a server-side cursor,
# which PostgreSQL only keeps inside a transaction.
bp = Blueprint("archives", __name__)

from app.archives import routes  # noqa: E402,F401
