"""Reading the trail: pages for administrators, one record's history, the chain's check,
pruning by age and export as JSON Lines. Plain values in and out; no HTTP here."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.audit.trail import GENESIS, canonical, entry_hash, note, plain
from app.models import AuditChainHead, AuditEntry, utcnow

PRUNE = "audit.prune"


def as_dict(entry: AuditEntry) -> dict[str, Any]:
    """An entry as the API and the export show it."""
    return {
        "seq": entry.seq,
        "at": plain(entry.at),
        "actor_id": entry.actor_id,
        "actor": entry.actor,
        "action": entry.action,
        "record_id": None if entry.record_id is None else str(entry.record_id),
        "account_id": entry.account_id,
        "changes": json.loads(entry.changes),
        "request_id": entry.request_id,
        "prev_hash": entry.prev_hash,
        "hash": entry.hash,
    }


@dataclass(frozen=True)
class Filters:
    record_id: uuid.UUID | None = None
    actor: str | None = None
    action: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def newest_first(
    session: Session, filters: Filters, before_seq: int | None, limit: int
) -> tuple[list[AuditEntry], int | None]:
    """A page of entries newest first, and the sequence number the next page starts below."""
    query = select(AuditEntry).order_by(AuditEntry.seq.desc()).limit(limit + 1)
    if before_seq is not None:
        query = query.where(AuditEntry.seq < before_seq)
    if filters.record_id is not None:
        query = query.where(AuditEntry.record_id == filters.record_id)
    if filters.actor is not None:
        query = query.where(AuditEntry.actor == filters.actor.strip().lower())
    if filters.action is not None:
        query = query.where(AuditEntry.action == filters.action)
    if filters.since is not None:
        query = query.where(AuditEntry.at >= filters.since)
    if filters.until is not None:
        query = query.where(AuditEntry.at < filters.until)
    entries = list(session.scalars(query))
    if len(entries) > limit:
        return entries[:limit], entries[limit - 1].seq
    return entries, None


def history(session: Session, record_id: uuid.UUID) -> list[AuditEntry]:
    """One record's entries, oldest first (a record has few)."""
    query = select(AuditEntry).where(AuditEntry.record_id == record_id).order_by(AuditEntry.seq)
    return list(session.scalars(query))


# --- the chain's check -----------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    ok: bool
    checked: int
    last_seq: int
    last_hash: str
    problem: str | None = None
    seq: int | None = None


def _entries(session: Session, *conditions: Any, batch: int = 1000) -> Iterator[AuditEntry]:
    """Entries in chain order, read a batch at a time (the trail can be long)."""
    after = 0
    while True:
        query = select(AuditEntry).where(AuditEntry.seq > after, *conditions)
        rows = list(session.scalars(query.order_by(AuditEntry.seq).limit(batch)))
        yield from rows
        if len(rows) < batch:
            return
        after = rows[-1].seq
        session.expunge_all()


def _row(entry: AuditEntry) -> dict[str, Any]:
    return {
        "seq": entry.seq,
        "at": entry.at,
        "actor_id": entry.actor_id,
        "actor": entry.actor,
        "action": entry.action,
        "record_id": entry.record_id,
        "account_id": entry.account_id,
        "changes": entry.changes,
        "request_id": entry.request_id,
        "prev_hash": entry.prev_hash,
    }


def _pruned_through(session: Session) -> dict[int, str]:
    """What the prunes say they removed: the last removed sequence number and its hash."""
    found = {}
    for changes in session.scalars(select(AuditEntry.changes).where(AuditEntry.action == PRUNE)):
        data = json.loads(changes)
        found[int(data["removed_through_seq"])] = str(data["last_removed_hash"])
    return found


def verify(session: Session, anchor: tuple[int, str] | None = None) -> Verdict:
    """Walk the chain; the first entry that was altered, removed or inserted is the verdict."""
    head = session.get(AuditChainHead, 1)
    head_seq, head_hash = (head.last_seq, head.last_hash) if head else (0, GENESIS)
    pruned = _pruned_through(session)
    expected_seq, expected_prev = None, None
    checked = 0
    last_seq, last_hash = 0, GENESIS
    anchor_seen = anchor is None or anchor[0] == 0

    def bad(problem: str, seq: int | None) -> Verdict:
        return Verdict(False, checked, last_seq, last_hash, problem, seq)

    for entry in _entries(session):
        if expected_seq is None:
            # The first entry kept: the chain's start, or where a recorded prune ended.
            if entry.seq == 1:
                expected_prev = GENESIS
            elif pruned.get(entry.seq - 1) == entry.prev_hash:
                expected_prev = entry.prev_hash
            else:
                return bad(f"entries before {entry.seq} were removed (no prune recorded)", 1)
            expected_seq = entry.seq
        if entry.seq != expected_seq:
            return bad(f"entries {expected_seq}..{entry.seq - 1} were removed", expected_seq)
        if entry.prev_hash != expected_prev:
            return bad(
                f"entry {entry.seq} does not follow entry {entry.seq - 1} "
                "(an entry was inserted or replaced here)",
                entry.seq,
            )
        if entry_hash(_row(entry)) != entry.hash:
            return bad(
                f"entry {entry.seq} was altered (its content does not match its hash)", entry.seq
            )
        if anchor is not None and entry.seq == anchor[0]:
            if entry.hash != anchor[1]:
                return bad(f"entry {entry.seq} differs from the anchor kept outside", entry.seq)
            anchor_seen = True
        checked += 1
        last_seq, last_hash = entry.seq, entry.hash
        expected_seq, expected_prev = entry.seq + 1, entry.hash
    if (last_seq, last_hash) != (head_seq, head_hash):
        if last_seq > head_seq:
            return bad(
                f"entries after {head_seq} were inserted past the chain's head", head_seq + 1
            )
        return bad(f"entries {last_seq + 1}..{head_seq} were removed from the end", last_seq + 1)
    if not anchor_seen:
        return bad(f"the anchor's entry {anchor[0]} is not in the trail", anchor[0])  # type: ignore[index]
    return Verdict(True, checked, last_seq, last_hash)


# --- retention and export --------------------------------------------------------------


def prune(session: Session, days: int, now: datetime | None = None) -> int:
    """Remove entries older than `days`, and say so in the trail itself, so that the chain
    stays verifiable from the first entry kept (and a removal nobody recorded does not)."""
    cutoff = (now or utcnow()) - timedelta(days=days)
    last = session.scalars(
        select(AuditEntry).where(AuditEntry.at < cutoff).order_by(AuditEntry.seq.desc()).limit(1)
    ).first()
    if last is None:
        return 0
    removed = session.scalar(
        select(func.count()).select_from(AuditEntry).where(AuditEntry.seq <= last.seq)
    )
    note(
        session,
        PRUNE,
        {
            "removed_through_seq": last.seq,
            "last_removed_hash": last.hash,
            "removed": int(removed or 0),
            "older_than": plain(cutoff),
        },
    )
    session.execute(delete(AuditEntry).where(AuditEntry.seq <= last.seq))
    session.commit()
    return int(removed or 0)


def export_lines(session: Session, since: datetime | None, until: datetime | None) -> Iterator[str]:
    """JSON Lines, oldest first, for a log system."""
    conditions = []
    if since is not None:
        conditions.append(AuditEntry.at >= since)
    if until is not None:
        conditions.append(AuditEntry.at < until)
    for entry in _entries(session, *conditions):
        yield canonical(as_dict(entry))
