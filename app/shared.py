"""What the processes of one `flask serve` share when no Redis is set: a SQLite file in a
folder the server makes before it forks them (app/processes.py). Rate limits keep their
counters there (`processes://`, the default `RATELIMIT_STORAGE_URI`), the statistics their
double-click memory (app/stats/clicks.py); one process keeps both in its memory instead."""

from __future__ import annotations

import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path

from limits.storage import MemoryStorage, Storage

#: The file in the shared folder.
FILE_NAME = "shared.sqlite3"


def connect(path: Path) -> sqlite3.Connection:
    """A connection to the shared file, in autocommit mode (transactions are begun by hand).
    Its content lives as long as the server: nothing is worth a sync to disk."""
    connection = sqlite3.connect(path, timeout=10, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=OFF")
    return connection


class ProcessesStorage(Storage):
    """`processes://`: rate-limit counters in memory while the server is one process; in the
    shared file from `share(path)` on, which the server calls before forking its processes.
    Only what the fixed-window strategy (Flask-Limiter's default) needs."""

    STORAGE_SCHEME = ["processes"]

    def __init__(self, uri: str | None = None, wrap_exceptions: bool = False, **options: object):
        super().__init__(uri, wrap_exceptions=wrap_exceptions)
        self._memory: MemoryStorage | None = None
        self.path: Path | None = None
        self._local = threading.local()
        self._lock = threading.Lock()

    @property
    def memory(self) -> MemoryStorage:
        """Made at first use: it starts a thread, which a server about to fork has not yet."""
        with self._lock:
            if self._memory is None:
                self._memory = MemoryStorage()
            return self._memory

    @property
    def base_exceptions(self) -> type[Exception]:
        return sqlite3.Error

    def share(self, path: Path) -> None:
        with closing(connect(path)) as connection:
            connection.execute(
                "CREATE TABLE IF NOT EXISTS limits "
                "(key TEXT PRIMARY KEY, count INTEGER NOT NULL, expires REAL NOT NULL)"
            )
        self.path = path

    def _connection(self) -> sqlite3.Connection:
        """One connection per thread of a process (a forked child opens its own)."""
        assert self.path is not None
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = connect(self.path)
        return connection

    def incr(self, key: str, expiry: int, amount: int = 1) -> int:
        if self.path is None:
            return self.memory.incr(key, expiry, amount)
        now = time.time()
        connection = self._connection()
        connection.execute("BEGIN IMMEDIATE")
        try:
            connection.execute("DELETE FROM limits WHERE key = ? AND expires <= ?", (key, now))
            (count,) = connection.execute(
                "INSERT INTO limits VALUES (?, ?, ?) "
                "ON CONFLICT (key) DO UPDATE SET count = count + excluded.count "
                "RETURNING count",
                (key, amount, now + expiry),
            ).fetchone()
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        return int(count)

    def get(self, key: str) -> int:
        if self.path is None:
            return self.memory.get(key)
        row = self._row(key)
        return 0 if row is None else int(row[0])

    def get_expiry(self, key: str) -> float:
        if self.path is None:
            return self.memory.get_expiry(key)
        row = self._row(key)
        return time.time() if row is None else float(row[1])

    def _row(self, key: str) -> tuple[int, float] | None:
        return (
            self._connection()
            .execute(
                "SELECT count, expires FROM limits WHERE key = ? AND expires > ?",
                (key, time.time()),
            )
            .fetchone()
        )

    def check(self) -> bool:
        if self.path is None:
            return self.memory.check()
        self._connection().execute("SELECT 1").fetchone()
        return True

    def reset(self) -> int | None:
        if self.path is None:
            return self.memory.reset()
        return self._connection().execute("DELETE FROM limits").rowcount

    def clear(self, key: str) -> None:
        if self.path is None:
            self.memory.clear(key)
            return
        self._connection().execute("DELETE FROM limits WHERE key = ?", (key,))
