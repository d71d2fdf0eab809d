"""Owed deletions: objects no row points at any more, removed after the commit that let go of
them (the side effects' order, STYLE.md).

A write owes an object's deletion (`owe`) in its own transaction: a `pending_object_deletions`
row, and the key noted on the session. After the commit the write carries out what it owes
(`carry_out`); a deletion that fails stays owed, and a later request, `flask storage
reconcile` or an operator retries it (`retry`). A rolled-back write owes nothing.
"""

from __future__ import annotations

import logging

from sqlalchemy import delete, select

from app.extensions import db
from app.models import PendingObjectDeletion
from app.storage import Storage, StorageError

log = logging.getLogger(__name__)

_OWED = "owed_deletions"
#: Owed deletions a request carries out after its own, oldest first.
RETRIES_PER_REQUEST = 5


def owe(key: str) -> None:
    """Owe the deletion of the object `key` in this transaction."""
    db.session.add(PendingObjectDeletion(key=key))
    db.session.info.setdefault(_OWED, []).append(key)


def take_owed() -> list[str]:
    """The keys this transaction owes (call before its commit, or to forget them on a
    rollback)."""
    return db.session.info.pop(_OWED, [])


def carry_out(storage: Storage, keys: list[str]) -> bool:
    """Delete the objects a committed write owes; whether all went."""
    return all([delete_object(storage, key) for key in keys])


def delete_object(storage: Storage, key: str) -> bool:
    """Remove an object whose deletion is owed (committed); on failure it stays owed."""
    try:
        storage.delete(key)
    except StorageError as exc:
        log.warning("deletion of object %s failed, left pending for a retry: %s", key, exc)
        _note_failed_attempt(key, exc)
        return False
    db.session.execute(delete(PendingObjectDeletion).where(PendingObjectDeletion.key == key))
    db.session.commit()
    return True


def _note_failed_attempt(key: str, exc: Exception) -> None:
    pending = db.session.get(PendingObjectDeletion, key)
    if pending is not None:
        pending.attempts += 1
        pending.last_error = str(exc)[:1000]
        db.session.commit()


def retry(storage: Storage, limit: int | None = None) -> tuple[int, int]:
    """Carry out owed deletions, oldest first; returns how many succeeded and failed."""
    statement = select(PendingObjectDeletion.key).order_by(PendingObjectDeletion.created_at)
    if limit is not None:
        statement = statement.limit(limit)
    keys = list(db.session.scalars(statement))
    done = sum(delete_object(storage, key) for key in keys)
    return done, len(keys) - done
