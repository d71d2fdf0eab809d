"""The request path's side of the statistics: a download becomes an event in memory, nothing
more. A background thread per process flushes the events every `STATS_FLUSH_SECONDS` and at
shutdown (aggregation.py); a crash loses at most the events of one interval."""

from __future__ import annotations

import atexit
import logging
import threading
import time
import uuid
import weakref
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flask import Flask, current_app, request

from app.signals import downloaded
from app.stats.aggregation import flush_events
from app.stats.clicks import MemoryClicks, RedisClicks, SharedClicks
from app.stats.events import (
    DOORS,
    DOUBLE_CLICK_SECONDS,
    DOWNLOAD_STATUSES,
    MAX_USER_AGENT,
    PAGE,
    VIEW_STATUSES,
    Download,
)

#: Events kept while the database cannot take them; beyond it the oldest are dropped, so a
#: long database outage costs counts, never the process's memory.
MAX_PENDING = 100_000

log = logging.getLogger(__name__)
_collectors: weakref.WeakSet[Collector] = weakref.WeakSet()


class Collector:
    """Events of one process, handed from the request threads to the flush thread."""

    def __init__(self, app: Flask, clock: Callable[[], float], interval: float | None) -> None:
        self.app = app
        self.clock = clock
        self.interval = interval
        self.pending: deque[Download] = deque(maxlen=MAX_PENDING)
        self.clicks: MemoryClicks | RedisClicks | SharedClicks = MemoryClicks(DOUBLE_CLICK_SECONDS)
        self.salts: dict[Any, bytes] = {}
        self.rolled_over_on: Any = None
        self._flush_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def add(self, event: Download) -> None:
        self.pending.append(event)

    def start(self) -> None:
        """Start the flush thread (once), at the first request a process serves: from then on
        it also destroys yesterday's salt at midnight when nobody downloads anything."""
        if self._thread is not None or self.interval is None:
            return
        with self._start_lock:
            if self._thread is None:
                # The thread holds only a weak reference: an app dropped (in tests) ends it.
                self._thread = threading.Thread(
                    target=_flush_loop,
                    args=(weakref.ref(self), self._stop, self.interval),
                    name="stats-flush",
                    daemon=True,
                )
                self._thread.start()

    def flush(self) -> int:
        """Write the pending events (in batches); how many were taken. Serialised, so the
        double-click state moves forward in event order."""
        with self._flush_lock, self.app.app_context():
            return flush_events(self)

    def share(self, path: Path) -> None:
        """The server is about to fork several processes: the double-click rule's memory
        moves to their shared file, unless it is in Redis already."""
        if isinstance(self.clicks, MemoryClicks):
            self.clicks = SharedClicks(path)

    def stop(self) -> None:
        """Stop the thread and write what is pending (at shutdown)."""
        self._stop.set()
        if self.pending:
            self.flush()


def _flush_loop(ref: weakref.ref[Collector], stop: threading.Event, interval: float) -> None:
    while not stop.wait(interval):
        collector = ref()
        if collector is None:
            return
        try:
            collector.flush()
        except Exception:  # the next round tries again; the events were put back
            log.exception("statistics flush failed")
        del collector


@atexit.register
def _flush_all_at_exit() -> None:
    for collector in list(_collectors):
        try:
            collector.stop()
        except Exception:
            log.exception("statistics flush at shutdown failed")


def init_app(app: Flask) -> None:
    if app.config["STATS"] != "on":
        return
    background = app.config["STATS_BACKGROUND_FLUSH"]
    collector = Collector(
        app,
        app.config.get("STATS_CLOCK") or time.time,
        app.config["STATS_FLUSH_SECONDS"] if background else None,
    )
    if app.config["STATS_REDIS_URL"]:
        collector.clicks = RedisClicks(
            app.config["STATS_REDIS_URL"], app.config["RATELIMIT_KEY_PREFIX"]
        )
    app.extensions["stats"] = collector
    app.extensions.setdefault("share_between_processes", []).append(collector.share)
    downloaded.connect(_count_sent, app)
    if background:
        _collectors.add(collector)
        app.before_request(collector.start)
        # A forked server process leaves its inherited exit handlers to its parent.
        app.extensions.setdefault("at_process_exit", []).append(collector.stop)


def count_download(door: str, record_id: uuid.UUID, status: int, user_id: int | None) -> None:
    """Every download door calls this with its answer's status before returning it (a door
    below the statistics sends `app.signals.downloaded` instead): the one hook of the
    statistics on the request path (an append to memory, no I/O). `user_id`: the
    token's account, else None (the visitor is then the client's address and User-Agent).
    Only 200 and 206 count: a 304 hands out no content."""
    if door not in DOORS:
        raise ValueError(f"unknown door {door!r}")
    if status in DOWNLOAD_STATUSES:
        _count(door, record_id, user_id)


def deferred_counter(door: str, user_id: int | None) -> Callable[[uuid.UUID], None] | None:
    """For a body that hands out several records (a folder ZIP): a function that counts one
    of them by this request's visitor, to call once its bytes have been handed to the
    server, even after the request (from the thread or event loop that streams the body).
    None when nothing would count (statistics off, HEAD)."""
    if door not in DOORS:
        raise ValueError(f"unknown door {door!r}")
    collector: Collector | None = current_app.extensions.get("stats")
    if collector is None or request.method != "GET":
        return None
    address, user_agent = _visitor_of_request()

    def count(record_id: uuid.UUID) -> None:
        collector.add(Download(collector.clock(), record_id, door, user_id, address, user_agent))

    return count


def _count_sent(app: Flask, **download: Any) -> None:
    """A download a door below the statistics sent (app/signals.py)."""
    count_download(**download)


def count_view(record_id: uuid.UUID, status: int) -> None:
    """A view of a record's landing page (200, or 304 from a reader's cache), counted by the
    same rules as a download, apart from the downloads."""
    if status in VIEW_STATUSES:
        _count(PAGE, record_id, None)


def _visitor_of_request() -> tuple[str, str]:
    """The client's address and User-Agent as an event keeps them. The User-Agent is cut
    after `MAX_USER_AGENT` + 1 characters: an event holds at most that much of it, and the
    flush classifies a cut one as a machine without matching it (aggregation.py)."""
    user_agent = request.headers.get("User-Agent", "")[: MAX_USER_AGENT + 1]
    return request.remote_addr or "", user_agent


def _count(door: str, record_id: uuid.UUID, user_id: int | None) -> None:
    collector: Collector | None = current_app.extensions.get("stats")
    # A HEAD request asks about the content without receiving it: not a download.
    if collector is None or request.method != "GET":
        return
    address, user_agent = _visitor_of_request()
    collector.add(Download(collector.clock(), record_id, door, user_id, address, user_agent))
