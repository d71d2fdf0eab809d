"""Download statistics by the COUNTER rules (issue 26), in invenio-stats' shape: the download
doors hand an event to an in-memory collector (collector.py) and return; a background flush
classifies, filters and aggregates the events in batches (aggregation.py); queries.py reads
the per-day counts for the endpoints (routes.py) and the monthly report (cli.py)."""

from app.stats.collector import count_download, count_view, deferred_counter, init_app
from app.stats.events import DOORS

__all__ = ["DOORS", "count_download", "count_view", "deferred_counter", "init_app"]
