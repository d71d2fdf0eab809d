"""The double-click rule's memory: when each visitor last asked for each record. In the
process by default (the rule then holds per process); in Redis with `STATS_REDIS_URL`, where
every replica sees every replica's clicks. Either way an entry lives about a minute."""

from __future__ import annotations

import uuid
from typing import Any

#: How long Redis keeps a click: the rule's 30 s plus room for replicas flushing late.
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
