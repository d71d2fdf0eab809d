"""The token and record caches: on PostgreSQL, this process keeps the caller's token check and
the record of `GET /api/files/{id}` and of downloads (and the cover a record shows,
app/covers), and answers them again without a query.

Every committed change to a watched table, whoever makes it (any process, the CLI, SQL by
hand), makes a PostgreSQL trigger notify that table's channel, and the notification empties the
channel's entries in every process, this one also emptying them itself when its session sends
the change and again at commit (the session is the app's only write path to watched tables).
Whatever happens, an entry is re-read after its channel's `max_age` seconds, and nothing is
cached while the listening connection is down or the triggers are missing.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, current_app, has_app_context
from sqlalchemy import Delete, TextClause, Update, event, inspect
from sqlalchemy.orm import ORMExecuteState, Session

log = logging.getLogger(__name__)

#: Channels, and the triggers that notify on them.
TOKENS = "auth_changes"
RECORDS = "record_changes"
TRIGGERS = {
    TOKENS: ("api_tokens_auth_changes", "users_auth_changes"),  # migration 0007
    RECORDS: ("file_records_changes", "covers_changes"),  # migrations 0008, 0028
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


# --- this process's own changes ----------------------------------------------------------

#: session.info key: the channels the session's open transaction has changed.
_CHANGED = "cache_channels_changed"


@functools.cache
def _watched() -> dict[str, dict[Any, frozenset[str] | None]]:
    """Per channel, the tables its entries are read from and the columns whose change can make
    an entry wrong (None: any), as the triggers of migrations 0007, 0008 and 0028 watch them."""
    from app.models import ApiToken, Cover, FileRecord, User

    return {
        TOKENS: {
            ApiToken.__table__: frozenset({"token_hash", "expires_at", "user_id"}),
            User.__table__: frozenset({"is_active", "is_admin"}),
        },
        RECORDS: {FileRecord.__table__: None, Cover.__table__: None},
    }


def _channels_of_flush(session: Session, watched: dict[str, Any]) -> set[str]:
    """The channels whose rows a flush changed or deleted (insertions end no entry)."""
    changed = set()
    for obj in (*session.dirty, *session.deleted):
        table = getattr(type(obj), "__table__", None)
        for channel, tables in watched.items():
            if table not in tables:
                continue
            columns = tables[table]
            if obj in session.deleted or columns is None:
                changed.add(channel)
            elif any(attrs.history.has_changes() for attrs in _attrs(obj, columns)):
                changed.add(channel)
    return changed


def _attrs(obj: Any, columns: frozenset[str]) -> list[Any]:
    state = inspect(obj)
    return [state.attrs[name] for name in columns if name in state.attrs]


def _channels_of_statement(state: ORMExecuteState, watched: dict[str, Any]) -> set[str]:
    """The channels an UPDATE or DELETE sent through the session may change: a DELETE of a
    watched table, an UPDATE that sets a watched column; hand-written SQL may change anything."""
    statement = state.statement
    if isinstance(statement, TextClause):
        return set(watched)
    if not isinstance(statement, Update | Delete):
        return set()
    changed = set()
    for channel, tables in watched.items():
        if statement.table not in tables:
            continue
        columns = tables[statement.table]
        if isinstance(statement, Delete) or columns is None or columns & _set_by(state):
            changed.add(channel)
    return changed


def _set_by(state: ORMExecuteState) -> set[str]:
    """The names of the values an UPDATE carries: those of `.values()`, and those of its
    parameters (a bulk UPDATE by primary key)."""
    names = set(state.statement.compile(dialect=state.session.get_bind().dialect).params)
    parameters = state.parameters
    for row in parameters if isinstance(parameters, list) else [parameters or {}]:
        names.update(row)
    return names


def _forget(channels: set[str]) -> None:
    cache: WatchedCache | None = current_app.extensions.get("cache")
    if cache is None:
        return
    for channel in channels & set(cache.channels):
        cache.forget(channel)


def _watch_sessions(session_target: Any) -> None:
    """Empty the channels a session changes: when the change is sent (so that no lookup
    between then and the commit keeps a row it read), and again at commit or rollback (so
    that neither the row as it was nor an uncommitted one stays). Registered once per
    session factory; each event looks up the cache of the app at hand."""
    if event.contains(session_target, "after_flush", _noted_flush):
        return
    event.listen(session_target, "after_flush", _noted_flush)
    event.listen(session_target, "do_orm_execute", _noted_statement)
    event.listen(session_target, "after_commit", _settled)
    event.listen(session_target, "after_rollback", _settled)


def _note(session: Session, channels: set[str]) -> None:
    if channels and has_app_context():
        session.info.setdefault(_CHANGED, set()).update(channels)
        _forget(channels)


def _noted_flush(session: Session, _context: Any) -> None:
    _note(session, _channels_of_flush(session, _watched()))


def _noted_statement(state: ORMExecuteState) -> None:
    if not state.is_select:
        _note(state.session, _channels_of_statement(state, _watched()))


def _settled(session: Session) -> None:
    channels = session.info.pop(_CHANGED, None)
    if channels and has_app_context():
        _forget(channels)


# --- wiring -----------------------------------------------------------------------------


def init_app(app: Flask, db: Any) -> None:
    """On PostgreSQL, where a token check or a record read is a network round trip, keep
    checked tokens and read records (`TOKEN_CACHE_SECONDS`, `RECORD_CACHE_SECONDS`; 0 turns
    one off). SQLite answers both in-process, and cannot tell other processes what changed.
    """
    engine = db.engine
    max_ages = {
        channel: app.config[setting]
        for channel, setting in ((TOKENS, "TOKEN_CACHE_SECONDS"), (RECORDS, "RECORD_CACHE_SECONDS"))
        if app.config[setting]
    }
    if not max_ages or engine.dialect.name != "postgresql":
        return
    import psycopg

    cargs, cparams = engine.dialect.create_connect_args(engine.url)
    options = {
        **cparams,
        **app.config["SQLALCHEMY_ENGINE_OPTIONS"].get("connect_args", {}),
        "autocommit": True,
        "connect_timeout": 5,
        # A listening connection only receives: keepalives are how a dead one shows.
        "keepalives": 1,
        "keepalives_idle": 30,
        "keepalives_interval": 10,
        "keepalives_count": 3,
        # So that operators can tell it in pg_stat_activity.
        "application_name": LISTENER_NAME,
    }
    cache = WatchedCache(lambda: psycopg.connect(*cargs, **options), max_ages)
    app.extensions["cache"] = cache
    event.listen(engine, "engine_disposed", lambda _engine: cache.reset())
    _watch_sessions(db.session)
