"""Hashing beside the I/O: a small thread pool (hashlib lets go of the GIL, so a piece is
hashed while the backend stores it) and the running SHA-256 of the uploads this process saw."""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any


def update(hashes: list[Any], chunk: bytes | memoryview) -> None:
    for h in hashes:
        h.update(chunk)


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(8, thread_name_prefix="tus-hash")
        return _pool


class Digests:
    """The running SHA-256 of uploads this process has seen every piece of, by upload id and
    offset. Only a shortcut: when a piece went to another replica or the process restarted,
    completion reads the stored object once more instead."""

    KEPT = 256

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[uuid.UUID, tuple[int, Any]] = OrderedDict()

    def at(self, upload_id: uuid.UUID, offset: int) -> Any | None:
        with self._lock:
            item = self._items.get(upload_id)
        if offset == 0:
            return hashlib.sha256()
        return item[1].copy() if item is not None and item[0] == offset else None

    def keep(self, upload_id: uuid.UUID, offset: int, digest: Any | None) -> None:
        with self._lock:
            self._items.pop(upload_id, None)
            if digest is not None:
                self._items[upload_id] = (offset, digest)
                while len(self._items) > self.KEPT:
                    self._items.popitem(last=False)


digests = Digests()
