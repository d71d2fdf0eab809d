"""Public answers that cost a page of records' work (lists, search, the front page, feeds,
OAI-PMH pages), kept whole in this process's memory and answered again while nothing changed.

An answer is kept with the database's state it was read from and the day (in the operator's
time zone, `access.today`) it was made on, and is given again only while both are the same:
any commit by any process (a release, a withdrawal, an edit) changes the state, and an embargo
ends when the day changes. The entries are bounded in number and bytes, the least recently
used going first.

The state is read per request, cheaply, from the connection the request reads with:
PostgreSQL's snapshot (`pg_current_snapshot()`: the transactions that had ended, which
changes with every commit or rollback in the cluster), SQLite's `PRAGMA data_version`
(changed by a commit of any other connection, in any process) and the connection's own count
of changed rows, per connection, any change seen on one of them ending every entry.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from flask import Flask, Response, current_app, request

from app.extensions import db
from app.files import access
from app.http import base_url

#: How many answers, and how many bytes of them, one process keeps.
MAX_ENTRIES = 512
MAX_BYTES = 64 * 1024 * 1024
#: Requests whose answer depends on headers the key does not hold are answered afresh.
_CONDITIONS = ("If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "Range")
#: Where a SQLite connection keeps what it last saw (the pool's `info` of the connection).
_SEEN = "answers_seen"


class AnswerCache:
    """Values by key, each with the state it was read in; a lookup with another state misses."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, tuple[Hashable, Any, int]] = OrderedDict()
        self._bytes = 0
        # SQLite: counts the changes any connection has seen.
        self._generation = 0
        # The settings the entries were made with (a test may change them).
        self._settings: dict[str, Any] = {}

    def get(self, key: Hashable, state: Hashable) -> Any:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != state:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: Hashable, state: Hashable, value: Any, size: int) -> None:
        if size > self.max_bytes // 8:  # one answer never takes the room of many
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[2]
            self._entries[key] = (state, value, size)
            self._bytes += size
            while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                _, (_, _, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
            self._generation += 1

    def __len__(self) -> int:
        return len(self._entries)

    def state(self) -> Hashable:
        """The state of the database as the request's connection sees it now (before the
        answer's reads: what they see is this state or a later one)."""
        settings = current_app.config
        if settings != self._settings:  # the same values: a comparison of references
            self.clear()
            self._settings = dict(settings)
        connection = db.session.connection()
        if connection.dialect.name == "postgresql":
            return connection.exec_driver_sql("SELECT pg_current_snapshot()::text").scalar()
        pooled = connection.connection
        raw = pooled.dbapi_connection
        seen = (raw.execute("PRAGMA data_version").fetchone()[0], raw.total_changes)
        with self._lock:
            if pooled.info.get(_SEEN) != seen:
                # Another connection committed, or this one wrote, since it last looked (or
                # it never looked): whatever was kept may be older.
                pooled.info[_SEEN] = seen
                self._generation += 1
                self._entries.clear()
                self._bytes = 0
            return self._generation


def answers() -> AnswerCache | None:
    return current_app.extensions.get("answers")


def lookup(key: Hashable) -> tuple[Any, Hashable] | None:
    """The value kept for `key` in this state of the database and day, and the state to
    `keep` a new one with; None when this request may not use the cache."""
    cache = answers()
    if cache is None:
        return None
    state = (cache.state(), access.today())
    return cache.get(key, state), state


def keep(key: Hashable, state: Hashable, value: Any, size: int) -> None:
    cache = answers()
    if cache is not None:
        cache.put(key, state, value, size)


def cacheable_request() -> bool:
    return request.method in ("GET", "HEAD") and not any(
        name in request.headers for name in _CONDITIONS
    )


def request_key(*extra: Hashable) -> tuple[Hashable, ...]:
    """What an answer of the current request depends on besides the data and the day: the
    view, the address the links are made from, the path and query, and `extra`."""
    return (request.endpoint, base_url(), request.script_root, request.full_path, *extra)


def cached(
    vary: Callable[[], Hashable] = lambda: None,
    keeps: Callable[[Response], bool] = lambda _response: True,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A view whose 200 answers are kept whole; `vary` gives what else the answer depends on
    (the page's language), `keeps` whether an answer may be kept (one that shows the time)."""

    def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(view)
        def answered(*args: Any, **kwargs: Any) -> Any:
            key = request_key(vary())
            found = lookup(key) if cacheable_request() else None
            if found is None:
                return view(*args, **kwargs)
            value, state = found
            if value is not None:
                status, headers, body = value
                return Response(body, status=status, headers=headers)
            response = current_app.make_response(view(*args, **kwargs))
            if (
                response.status_code == 200
                and not response.is_streamed
                and "Set-Cookie" not in response.headers
                and keeps(response)
            ):
                body = response.get_data()
                headers = list(response.headers.items())
                keep(key, state, (200, headers, body), len(body))
            return response

        return answered

    return decorate


def init_app(app: Flask) -> None:
    """Keep answers unless the app says not to (`ANSWER_CACHE=False`, for comparisons)."""
    if app.config.get("ANSWER_CACHE", True):
        app.extensions["answers"] = AnswerCache()
