"""Public answers that cost a page of records' work (lists, search, the front page, feeds,
OAI-PMH pages), kept whole in this process's memory and answered again while nothing changed.

An answer is kept with the database's state it was read from and the day (in the operator's
time zone, `access.today`) it was made on, and is given again only while both are the same:
any commit by any process (a release, a withdrawal, an edit) changes the state, and an embargo
ends when the day changes. The entries are bounded in number and bytes, the least recently
used going first.

The state is read per request, cheaply: on PostgreSQL the snapshot of the request's
connection (`pg_current_snapshot()`: which transactions had ended, so it changes with every
commit or rollback in the cluster), on SQLite `PRAGMA data_version` of a connection the cache
keeps for it alone (it changes with every commit of any other connection, in any process).
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from flask import Flask, Response, current_app, g, request
from sqlalchemy import Engine

from app.database import read_without_transaction
from app.extensions import db
from app.files import access
from app.http import base_url

#: How many answers, and how many bytes of them, one process keeps.
MAX_ENTRIES = 512
MAX_BYTES = 64 * 1024 * 1024
#: Requests whose answer depends on headers the key does not hold are answered afresh.
_CONDITIONS = ("If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "Range")
#: How long a request waits for another that makes the same answer, before making it too.
WAIT_SECONDS = 10.0


class AnswerCache:
    """Values by key, each with the state it was read in; a lookup with another state misses.

    One request makes a missing answer while the others that ask for it in the same state
    wait for it (up to `WAIT_SECONDS`), instead of all making it at once after a change.
    """

    def __init__(
        self,
        sqlite_path: str | None = None,
        max_entries: int = MAX_ENTRIES,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, tuple[Hashable, Any, int]] = OrderedDict()
        self._bytes = 0
        self._making: dict[tuple[Hashable, Hashable], threading.Event] = {}
        # The settings the entries were made with (a test may change them).
        self._settings: dict[str, Any] = {}
        # SQLite: a connection of its own that only asks whether anyone committed.
        self._sqlite_path = sqlite_path
        self._watcher: sqlite3.Connection | None = None
        self._watcher_pid = 0

    def get(self, key: Hashable, state: Hashable) -> Any:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] != state:
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def get_or_claim(self, key: Hashable, state: Hashable) -> tuple[Any, bool]:
        """The value kept for `key` in `state`, waiting while another request makes it; else
        None and whether this request is now the one making it (then `put` or `release`)."""
        while True:
            with self._lock:
                entry = self._entries.get(key)
                if entry is not None and entry[0] == state:
                    self._entries.move_to_end(key)
                    return entry[1], False
                making = self._making.get((key, state))
                if making is None:
                    self._making[key, state] = threading.Event()
                    return None, True
            if not making.wait(WAIT_SECONDS):
                return None, False
            # Made (or given up): look again.

    def release(self, key: Hashable, state: Hashable) -> None:
        with self._lock:
            making = self._making.pop((key, state), None)
        if making is not None:
            making.set()

    def put(self, key: Hashable, state: Hashable, value: Any, size: int) -> None:
        if size <= self.max_bytes // 8:  # one answer never takes the room of many
            with self._lock:
                old = self._entries.pop(key, None)
                if old is not None:
                    self._bytes -= old[2]
                self._entries[key] = (state, value, size)
                self._bytes += size
                while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
                    _, (_, _, dropped) = self._entries.popitem(last=False)
                    self._bytes -= dropped
        self.release(key, state)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def state(self) -> Hashable:
        """The state of the database now, read before the answer's reads (what they see is
        this state or a later one)."""
        settings = current_app.config
        if settings != self._settings:  # the same values: a comparison of references
            self.clear()
            self._settings = dict(settings)
        if self._sqlite_path is None:
            connection = db.session.connection()
            return connection.exec_driver_sql("SELECT pg_current_snapshot()::text").scalar()
        with self._lock:
            if self._watcher is None or self._watcher_pid != os.getpid():
                # A forked child opens its own (the parent's is not to be touched).
                self._watcher = sqlite3.connect(
                    f"file:{self._sqlite_path}?mode=rw", uri=True, check_same_thread=False
                )
                self._watcher_pid = os.getpid()
                self._entries.clear()
                self._bytes = 0
            # Changes whenever another connection commits; this one never writes.
            return (id(self._watcher), self._watcher.execute("PRAGMA data_version").fetchone()[0])


def answers() -> AnswerCache | None:
    return current_app.extensions.get("answers")


def lookup(key: Hashable) -> tuple[Any, Hashable] | None:
    """The value kept for `key` in this state of the database and day, and the state to
    `keep` a new one with; None when this request may not use the cache. A request that
    misses makes the answer (the others wait for it): it keeps it, or the end of the request
    lets the waiting go on."""
    cache = answers()
    if cache is None:
        return None
    # The state and, on a miss, the answer's reads without BEGIN and ROLLBACK around them.
    read_without_transaction()
    state = (cache.state(), access.today())
    value, claimed = cache.get_or_claim(key, state)
    if claimed:
        g.setdefault("answers_claimed", []).append((key, state))
    return value, state


def keep(key: Hashable, state: Hashable, value: Any, size: int) -> None:
    cache = answers()
    if cache is not None:
        cache.put(key, state, value, size)


def _release_claims(_error: BaseException | None) -> None:
    cache = answers()
    for key, state in g.pop("answers_claimed", ()):
        if cache is not None:
            cache.release(key, state)


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


def init_app(app: Flask, engine: Engine) -> None:
    """Keep answers on PostgreSQL and on a SQLite file (a comparison without them removes
    `app.extensions["answers"]`)."""
    path = None
    if engine.dialect.name == "sqlite":
        path = engine.url.database
        if not path or path == ":memory:" or path.startswith("file:"):
            return
        path = os.path.abspath(path)
    app.extensions["answers"] = AnswerCache(path)
    app.teardown_request(_release_claims)
