"""The double-click rule's memory: when each visitor last asked for each record. In the
process by default; in the file the processes of one server share when it runs several
(app/shared.py); in Redis with `STATS_REDIS_URL`, where every replica sees every replica's
clicks. Either way an entry lives about a minute."""

from __future__ import annotations

import uuid
from contextlib import closing
from pathlib import Path
from typing import Any

from app.shared import connect

#: How long Redis (or the shared file) keeps a click: the rule's 30 s plus room for replicas
#: flushing late.
REDIS_TTL_MS = 120_000

Key = tuple[str, uuid.UUID]


class MemoryClicks:
    def __init__(self, window: float) -> None:
        self.window = window
        self.last: dict[Key, float] = {}

    def previous(self, keys: list[tuple[Key, float]]) -> list[float | None]:
        """For each (key, at), in order, the click before it; each becomes the latest."""
        answers = []
        for key, at in keys:
            answers.append(self.last.get(key))
            self.last[key] = at
        return answers

    def forget_before(self, now: float) -> None:
        self.last = {key: at for key, at in self.last.items() if now - at < self.window}

    def snapshot(self) -> dict[Key, float]:
        return dict(self.last)

    def restore(self, snapshot: dict[Key, float] | None) -> None:
        if snapshot is not None:
            self.last = snapshot


class RedisClicks:
    """One `SET key at PX ttl GET` per click, pipelined: the previous value comes back."""

    def __init__(self, url: str, prefix: str) -> None:
        import redis

        self.redis: Any = redis.Redis.from_url(url)
        self.prefix = f"{prefix}:stats:click"

    def previous(self, keys: list[tuple[Key, float]]) -> list[float | None]:
        pipe = self.redis.pipeline(transaction=False)
        for (visitor, record_id), at in keys:
            pipe.set(f"{self.prefix}:{visitor}:{record_id}", repr(at), px=REDIS_TTL_MS, get=True)
        return [None if old is None else float(old) for old in pipe.execute()]

    def forget_before(self, now: float) -> None:
        """Redis expires the keys itself."""

    def snapshot(self) -> None:
        return None

    def restore(self, snapshot: None) -> None:
        """What Redis has seen stays seen."""


class SharedClicks:
    """The clicks of all processes of one server, in their shared SQLite file: read and
    replaced in one transaction per batch, as Redis's `SET ... GET` does per click."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with closing(connect(path)) as connection:
            connection.execute(
                "CREATE TABLE IF NOT EXISTS clicks "
                "(visitor TEXT, record_id TEXT, at REAL NOT NULL, PRIMARY KEY (visitor, record_id))"
            )

    def previous(self, keys: list[tuple[Key, float]]) -> list[float | None]:
        answers: list[float | None] = []
        with closing(connect(self.path)) as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                for (visitor, record_id), at in keys:
                    key = (visitor, str(record_id))
                    row = connection.execute(
                        "SELECT at FROM clicks WHERE visitor = ? AND record_id = ?", key
                    ).fetchone()
                    answers.append(None if row is None else row[0])
                    connection.execute(
                        "INSERT INTO clicks VALUES (?, ?, ?) "
                        "ON CONFLICT DO UPDATE SET at = excluded.at",
                        (*key, at),
                    )
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise
        return answers

    def forget_before(self, now: float) -> None:
        """Kept as long as in Redis: another process may flush an earlier click late."""
        with closing(connect(self.path)) as connection:
            connection.execute("DELETE FROM clicks WHERE at < ?", (now - REDIS_TTL_MS / 1000,))

    def snapshot(self) -> None:
        return None

    def restore(self, snapshot: None) -> None:
        """What the other processes have seen stays seen."""
