"""What this process has already read from PostgreSQL and may answer again without a query.

Two kinds of reads repeat on almost every request: the check of the caller's token and, for
`GET /api/files/{id}` and the downloads, the record itself. Each costs a database round trip,
more than the rest of the request. On PostgreSQL this process keeps their results, and every
change that could make one wrong is announced by the database itself, whoever makes it (a
request in any process, the CLI, SQL by hand): triggers send a notification on a channel per
kind of entry (`TOKENS`: tokens and accounts, migration 0007; `RECORDS`: file records,
migration 0008).

The cache listens on a connection of its own. It does not need a thread: before each lookup it
takes in, without waiting, whatever notifications have reached that connection, and a
notification empties the entries of its channel. Changes made in this process empty them at
once as well (the callers see to that). Another process's change is seen as soon as PostgreSQL
has delivered its notification, which it sends at commit (well under a millisecond on one
host). While the listening connection is down, or the triggers are missing, nothing is cached;
entries are also re-read after their channel's `max_age` seconds whatever happens, which bounds
what a silently dropped connection could hide.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from flask import current_app
from sqlalchemy import event

log = logging.getLogger(__name__)

#: Channels, and the triggers that notify on them.
TOKENS = "auth_changes"
RECORDS = "record_changes"
TRIGGERS = {
    TOKENS: ("api_tokens_auth_changes", "users_auth_changes"),  # migration 0007
    RECORDS: ("file_records_changes",),  # migration 0008
}
#: The application_name of the listening connections, as pg_stat_activity shows them.
LISTENER_NAME = "file-repository cache"

# After a failed attempt to listen, how long lookups go to the database before the next one.
RETRY_SECONDS = 5.0


@dataclass
class _Channel:
    max_age: float
    entries: dict[Hashable, tuple[float, Any]] = field(default_factory=dict)
    # Bumped whenever the entries are dropped: a lookup that began before cannot store what
    # it read, which might be older than the change that dropped them.
    generation: int = 0


class WatchedCache:
    """Entries per channel, kept for as long as nothing announces a change and the
    channel's `max_age` (seconds) allows.

    `connect` opens a PostgreSQL connection in autocommit mode (psycopg). Lookups go through
    one lock and what they do under it takes microseconds; (re)connecting happens outside
    it, by one thread at a time and at most every `RETRY_SECONDS`, while the others read
    from the database.
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        max_ages: dict[str, float],
        max_entries: int = 10_000,
    ) -> None:
        unknown = set(max_ages) - set(TRIGGERS)
        if unknown:
            raise ValueError(f"no triggers known for channels {sorted(unknown)}")
        self._connect = connect
        self.max_entries = max_entries
        self._channels = {name: _Channel(max_age) for name, max_age in max_ages.items()}
        self._lock = threading.Lock()
        self._connection: Any = None
        self._pid = os.getpid()
        self._server_spoke = ""
        self._retry_at = 0.0

    @property
    def channels(self) -> tuple[str, ...]:
        return tuple(self._channels)

    def get(self, channel: str, key: Hashable) -> tuple[Any, int | None]:
        """The entry for `key` (None if there is none), and the generation to pass to `put`
        after a query. The generation is None while changes cannot be watched: then nothing
        may be stored."""
        with self._lock:
            opening = self._connection is None and time.monotonic() >= self._retry_at
            if opening:
                self._retry_at = time.monotonic() + RETRY_SECONDS  # the others go on meanwhile
        if opening:
            self._install(self._listen())
        with self._lock:
            if not self._drained():
                return None, None
            kept = self._channels[channel]
            entry = kept.entries.get(key)
            if entry is None:
                return None, kept.generation
            if time.monotonic() - entry[0] > kept.max_age:
                del kept.entries[key]
                return None, kept.generation
            return entry[1], kept.generation

    def put(self, channel: str, generation: int | None, key: Hashable, value: Any) -> None:
        """Keep `value`, read from the database after `get` returned `generation`."""
        with self._lock:
            kept = self._channels[channel]
            if generation is None or generation != kept.generation:
                return
            if len(kept.entries) >= self.max_entries:
                kept.entries.clear()
            kept.entries[key] = (time.monotonic(), value)

    def forget(self, channel: str) -> None:
        """Drop the entries of `channel`; for a change this process has made."""
        with self._lock:
            self._drop(channel)

    def reset(self) -> None:
        """Drop every entry and the listening connection (a new one is opened when needed);
        called when the engine's pool is disposed, e.g. at the end of a test or after a fork."""
        with self._lock:
            self._drop()
            self._close_connection()
            self._retry_at = 0.0

    def size(self, channel: str) -> int:
        return len(self._channels[channel].entries)

    # --- (re)connecting, outside the lock ---------------------------------------------------

    def _listen(self) -> Any:
        """A connection listening for changes, or None (then the cache stays off a while)."""
        connection = None
        try:
            connection = self._connect()
            for channel in self._channels:
                connection.execute(f"LISTEN {channel}")
            # LISTEN succeeds whether or not anything will ever notify: without the triggers
            # (a migration not applied) a change elsewhere would go unnoticed.
            needed = {name for channel in self._channels for name in TRIGGERS[channel]}
            present = connection.execute(
                "SELECT tgname FROM pg_trigger WHERE tgname = ANY(%s) AND tgenabled <> 'D'",
                (sorted(needed),),
            ).fetchall()
            missing = needed - {name for (name,) in present}
            if missing:
                raise LookupError(
                    f"triggers {', '.join(sorted(missing))} missing or disabled"
                    " (run `flask db upgrade`)"
                )
            # The server says nothing on a connection that only listens, except when it
            # is about to close it ("terminating connection ..."): libpq takes that
            # message as a notice, and sees the closed socket only on a later read.
            connection.add_notice_handler(self._on_notice)
        except Exception as exc:  # noqa: BLE001 - any failure means: not watching
            log.warning("cache off: cannot listen for changes (%s)", exc)
            if connection is not None:
                connection.close()
            return None
        return connection

    def _install(self, connection: Any) -> None:
        with self._lock:
            if connection is None or self._connection is not None:
                if connection is not None:
                    connection.close()
                return
            # Whatever changed while nobody listened: start empty.
            self._connection = connection
            self._pid = os.getpid()
            self._drop()

    # --- under the lock ---------------------------------------------------------------------

    def _drop(self, channel: str | None = None) -> None:
        for name, kept in self._channels.items():
            if channel is None or name == channel:
                kept.entries.clear()
                kept.generation += 1

    def _drained(self) -> bool:
        """Apply every notification that has arrived; False when changes are not watched."""
        if self._connection is None:
            return False
        if self._pid != os.getpid():  # forked: the connection belongs to the parent
            self._drop()
            self._close_connection()
            return False
        notified: set[str] = set()
        try:
            # libpq reads what has arrived, without waiting (`notifies(timeout=0)` may return
            # before reading the socket, and so miss a connection the server has closed).
            pgconn = self._connection.pgconn
            pgconn.consume_input()
            while (notify := pgconn.notifies()) is not None:
                notified.add(notify.relname.decode())
            if self._server_spoke:
                raise ConnectionError(self._server_spoke)
        except Exception as exc:  # noqa: BLE001
            log.warning("cache off: lost the connection that listens for changes (%s)", exc)
            self._drop()
            self._close_connection()
            self._retry_at = time.monotonic() + RETRY_SECONDS
            return False
        for channel in notified:
            self._drop(channel if channel in self._channels else None)
        return True

    def _on_notice(self, diagnostic: Any) -> None:
        self._server_spoke = diagnostic.message_primary or "a message from the server"

    def _close_connection(self) -> None:
        connection, self._connection = self._connection, None
        self._server_spoke = ""
        if connection is None or self._pid != os.getpid():
            return  # a forked child must not close its parent's connection
        try:
            connection.close()
        except Exception:  # noqa: BLE001 - it is being dropped anyway
            pass


def cache_for(channel: str) -> WatchedCache | None:
    """The current app's cache when it keeps `channel` (PostgreSQL, not turned off)."""
    cache: WatchedCache | None = current_app.extensions.get("cache")
    return cache if cache is not None and channel in cache.channels else None


#: Statements that can change rows (a SELECT ... FOR UPDATE counts too, harmlessly).
_CHANGING = re.compile(r"\b(?:update|delete|truncate|merge)\b|\bon\s+conflict\b", re.IGNORECASE)


def forget_on_change(engine: Any, cache: WatchedCache, channel: str, table: str) -> None:
    """Empty `channel` whenever this process changes `table`, whichever way the statement
    was written (ORM, Core, SQL text): when the statement runs, and again when its
    connection goes back to the pool, after the commit or rollback, so that what another
    thread read in between (the row as it was before) is not kept either. Other processes'
    changes arrive as notifications."""
    marker = f"changed:{channel}"

    @event.listens_for(engine, "after_cursor_execute")
    def noted(conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement[:6].upper() == "SELECT":  # most statements; skipped in a microsecond
            return
        if table in statement.lower() and _CHANGING.search(statement):
            conn.info[marker] = True
            cache.forget(channel)

    @event.listens_for(engine, "checkin")
    def released(_dbapi_connection: Any, record: Any) -> None:
        if record is not None and record.info.pop(marker, False):
            cache.forget(channel)
