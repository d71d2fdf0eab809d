"""Tokens already checked by this process, so that most protected requests need no query.

Checking a token costs a database round trip on every request, more than the rest of reading
a record. On PostgreSQL the callers of live tokens are kept here, and every change that could
end a token is announced by the database itself: triggers on `api_tokens` and `users`
(migration 0007) send a notification on the `auth_changes` channel when a token is deleted or
changed, or an account is deactivated, changes role or is deleted, whoever makes the change
(a request, `flask users deactivate` in another process, SQL by hand).

The cache listens on a connection of its own. It does not need a thread: before each lookup
it takes in, without waiting, whatever notifications have reached that connection, and any of
them empties the cache. So the cache is exact for changes made in this process (they also
empty it at once, see `forget_all`), and another process's change is seen as soon as
PostgreSQL has delivered its notification, which it sends at commit (well under a
millisecond on one host). While the listening connection is down, the cache is not used at
all; entries are also re-checked after `max_age` seconds whatever happens, which bounds what
a silently dropped connection could hide.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

log = logging.getLogger(__name__)

CHANNEL = "auth_changes"
#: The application_name of the listening connections, as pg_stat_activity shows them.
LISTENER_NAME = "file-repository token cache"
#: The triggers of migration 0007 that send the notifications.
TRIGGERS = ("api_tokens_auth_changes", "users_auth_changes")

# After a failed attempt to listen, how long lookups go to the database before the next one.
RETRY_SECONDS = 5.0


@dataclass
class CachedToken:
    token_hash: str
    expires_at: datetime | None
    last_used_at: datetime | None
    caller: Any  # app.auth.services.Caller
    checked_at: float  # time.monotonic() of the query


class TokenCache:
    """Live tokens by id, for as long as nothing announces a change and `max_age` allows.

    `connect` opens a PostgreSQL connection in autocommit mode (psycopg). Lookups go through
    one lock and what they do under it takes microseconds; (re)connecting happens outside
    it, by one thread at a time and at most every `RETRY_SECONDS`, while the others check
    their tokens in the database.
    """

    def __init__(
        self, connect: Callable[[], Any], max_age: float, max_entries: int = 10_000
    ) -> None:
        self._connect = connect
        self.max_age = max_age
        self.max_entries = max_entries
        self._entries: dict[int, CachedToken] = {}
        self._lock = threading.Lock()
        self._connection: Any = None
        self._pid = os.getpid()
        self._server_spoke = ""
        self._retry_at = 0.0
        # Bumped whenever entries are dropped: a lookup that began before cannot store what
        # it read, which might be older than the change that dropped them.
        self._generation = 0

    def get(self, token_id: int) -> tuple[CachedToken | None, int | None]:
        """The entry of a token, and the generation to pass to `put` after a query.

        The generation is None while changes cannot be watched: then nothing may be stored.
        """
        with self._lock:
            opening = self._connection is None and time.monotonic() >= self._retry_at
            if opening:
                self._retry_at = time.monotonic() + RETRY_SECONDS  # the others go on meanwhile
        if opening:
            self._install(self._listen())
        with self._lock:
            if not self._drained():
                return None, None
            entry = self._entries.get(token_id)
            if entry is not None and time.monotonic() - entry.checked_at > self.max_age:
                del self._entries[token_id]
                entry = None
            return entry, self._generation

    def put(self, generation: int | None, token_id: int, entry: CachedToken) -> None:
        with self._lock:
            if generation is None or generation != self._generation:
                return
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
            self._entries[token_id] = entry

    def forget_all(self) -> None:
        """Drop every entry; for a change this process has just committed."""
        with self._lock:
            self._drop_entries()

    def reset(self) -> None:
        """Drop every entry and the listening connection (a new one is opened when needed);
        called when the engine's pool is disposed, e.g. at the end of a test or after a fork."""
        with self._lock:
            self._drop_entries()
            self._close_connection()
            self._retry_at = 0.0

    def __len__(self) -> int:
        return len(self._entries)

    # --- (re)connecting, outside the lock ---------------------------------------------------

    def _listen(self) -> Any:
        """A connection listening for changes, or None (then the cache stays off a while)."""
        connection = None
        try:
            connection = self._connect()
            connection.execute(f"LISTEN {CHANNEL}")
            # LISTEN succeeds whether or not anything will ever notify: without the triggers
            # (migration 0007 not applied) a revocation elsewhere would go unnoticed.
            triggers = connection.execute(
                "SELECT count(*) FROM pg_trigger WHERE tgname = ANY(%s)", (list(TRIGGERS),)
            ).fetchone()[0]
            if triggers != len(TRIGGERS):
                raise LookupError(
                    f"triggers {', '.join(TRIGGERS)} missing (run `flask db upgrade`)"
                )
            # The server says nothing on a connection that only listens, except when it
            # is about to close it ("terminating connection ..."): libpq takes that
            # message as a notice, and sees the closed socket only on a later read.
            connection.add_notice_handler(self._on_notice)
        except Exception as exc:  # noqa: BLE001 - any failure means: not watching
            log.warning("token cache off: cannot listen for changes (%s)", exc)
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
            self._drop_entries()

    # --- under the lock ---------------------------------------------------------------------

    def _drop_entries(self) -> None:
        self._entries.clear()
        self._generation += 1

    def _drained(self) -> bool:
        """Apply every notification that has arrived; False when changes are not watched."""
        if self._connection is None:
            return False
        if self._pid != os.getpid():  # forked: the connection belongs to the parent
            self._drop_entries()
            self._close_connection()
            return False
        notified = False
        try:
            # libpq reads what has arrived, without waiting (`notifies(timeout=0)` may return
            # before reading the socket, and so miss a connection the server has closed).
            pgconn = self._connection.pgconn
            pgconn.consume_input()
            while pgconn.notifies() is not None:
                notified = True
            if self._server_spoke:
                raise ConnectionError(self._server_spoke)
        except Exception as exc:  # noqa: BLE001
            log.warning("token cache off: lost the connection that listens for changes (%s)", exc)
            self._drop_entries()
            self._close_connection()
            self._retry_at = time.monotonic() + RETRY_SECONDS
            return False
        if notified:
            self._drop_entries()
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
