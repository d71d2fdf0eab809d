"""Reading the trail: pages for administrators, one record's history, the chain's check,
pruning by age and export as JSON Lines. Plain values in and out; no HTTP here."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select, tuple_
from sqlalchemy.orm import Session

from app.audit.schemas import ENTRY_FIELDS
from app.audit.trail import GENESIS, HASHED, canonical, entry_hash, note, plain
from app.models import AuditChainHead, AuditEntry, utcnow

PRUNE = "audit.prune"


def as_dict(entry: AuditEntry) -> dict[str, Any]:
    """An entry as the API and the export show it (its `changes` as JSON, not as stored)."""
    shown = {name: plain(getattr(entry, name)) for name in ENTRY_FIELDS}
    shown["changes"] = json.loads(entry.changes)
    return shown


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


# --- the chains' check ----------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    ok: bool
    checked: int
    anchor: str
    problem: str | None = None
    seq: int | None = None


def _entries(
    session: Session, *conditions: Any, order: Any = None, batch: int = 1000
) -> Iterator[AuditEntry]:
    """Entries in `order` (by `seq` unless given), read a batch at a time (the trail can be
    long); `order` must be unique and ascending, as a keyset."""
    columns = order or (AuditEntry.seq,)
    after: tuple[Any, ...] | None = None
    while True:
        query = select(AuditEntry).where(*conditions)
        if after is not None:
            query = query.where(tuple_(*columns) > tuple_(*after))
        rows = list(session.scalars(query.order_by(*columns).limit(batch)))
        yield from rows
        if len(rows) < batch:
            return
        after = tuple(getattr(rows[-1], column.key) for column in columns)
        session.expunge_all()


def _row(entry: AuditEntry) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in HASHED}


def _pruned(session: Session) -> set[tuple[int, int, str]]:
    """Where recorded prunes left each chain: (chain, last removed chain_seq, its hash)."""
    found = set()
    for changes in session.scalars(select(AuditEntry.changes).where(AuditEntry.action == PRUNE)):
        for chain, (chain_seq, digest) in json.loads(changes)["chains"].items():
            found.add((int(chain), int(chain_seq), str(digest)))
    return found


#: The form of what `anchor_of` returns.
ANCHOR = re.compile(r"[0-9a-f]{64}:[0-9]+(,[0-9]+)*")


def anchor_of(heads: dict[int, tuple[int, str]]) -> str:
    """One line naming every chain's head (its length, and a digest of all their hashes), to
    keep outside the database: a later verify checks that the chains grew from there."""
    digest = hashlib.sha256(
        canonical([heads[chain][1] for chain in sorted(heads)]).encode()
    ).hexdigest()
    return f"{digest}:{','.join(str(heads[chain][0]) for chain in sorted(heads))}"


def verify(session: Session, anchor: str | None = None) -> Verdict:
    """Walk every chain; the first entry found altered, removed or inserted is the verdict.

    `anchor` is a value an earlier verify printed: then the chains must have grown from the
    heads it names (each head still in place, unchanged)."""
    heads = {
        head.id: (head.last_seq, head.last_hash) for head in session.scalars(select(AuditChainHead))
    }
    pruned = _pruned(session)
    checked = 0
    seen: dict[int, tuple[int, str]] = {chain: (0, GENESIS) for chain in heads}
    expected: tuple[int, int, str] | None = None  # chain, chain_seq, prev_hash
    last_seq_in_chain = 0

    def bad(problem: str, seq: int | None) -> Verdict:
        return Verdict(False, checked, "", problem, seq)

    for entry in _entries(session, order=(AuditEntry.chain, AuditEntry.chain_seq)):
        if entry.chain not in heads:
            return bad(
                f"entry {entry.seq} is in chain {entry.chain}, which does not exist", entry.seq
            )
        if expected is None or expected[0] != entry.chain:
            # The first entry kept of a chain: its start, or where a recorded prune ended.
            last_seq_in_chain = 0
            if entry.chain_seq == 1:
                expected = (entry.chain, 1, GENESIS)
            elif (entry.chain, entry.chain_seq - 1, entry.prev_hash) in pruned:
                expected = (entry.chain, entry.chain_seq, entry.prev_hash)
            else:
                return bad(
                    f"chain {entry.chain}: entries before entry {entry.seq} were removed "
                    "(no prune recorded)",
                    entry.seq,
                )
        _, chain_seq, prev = expected
        if entry.chain_seq != chain_seq:
            return bad(
                f"chain {entry.chain}: {entry.chain_seq - chain_seq} entries before entry "
                f"{entry.seq} were removed",
                entry.seq,
            )
        if entry.prev_hash != prev:
            return bad(
                f"entry {entry.seq} does not follow the entry before it in chain "
                f"{entry.chain} (an entry was inserted or replaced here)",
                entry.seq,
            )
        if entry.seq <= last_seq_in_chain:
            return bad(f"entry {entry.seq} is out of order in chain {entry.chain}", entry.seq)
        if entry_hash(_row(entry)) != entry.hash:
            return bad(
                f"entry {entry.seq} was altered (its content does not match its hash)", entry.seq
            )
        checked += 1
        last_seq_in_chain = entry.seq
        seen[entry.chain] = (entry.chain_seq, entry.hash)
        expected = (entry.chain, entry.chain_seq + 1, entry.hash)
    for chain, head in sorted(heads.items()):
        last = seen[chain]
        if last == head:
            continue
        if last[0] > head[0]:
            return bad(f"chain {chain}: entries were inserted past the chain's head", None)
        if last[0] == head[0]:
            return bad(f"chain {chain}: its last entry was replaced (not the chain's head)", None)
        return bad(f"chain {chain}: {head[0] - last[0]} entries were removed from its end", None)
    if anchor is not None:
        problem = _against_anchor(session, anchor, heads)
        if problem:
            return bad(problem, None)
    return Verdict(True, checked, anchor_of(heads))


def _against_anchor(session: Session, anchor: str, heads: dict[int, tuple[int, str]]) -> str | None:
    """Whether each chain still holds, at the length the anchor names, the entry it had."""
    digest, _, lengths_text = anchor.partition(":")
    try:
        lengths = [int(n) for n in lengths_text.split(",")]
    except ValueError:
        return "the anchor is not one that `flask audit verify` printed"
    if len(lengths) != len(heads):
        return "the anchor names another number of chains"
    then: dict[int, tuple[int, str]] = {}
    for chain, length in zip(sorted(heads), lengths, strict=True):
        if length == 0:
            then[chain] = (0, GENESIS)
            continue
        found = session.scalar(
            select(AuditEntry.hash).where(AuditEntry.chain == chain, AuditEntry.chain_seq == length)
        )
        if found is None:
            return f"chain {chain} no longer holds its entry {length} named by the anchor"
        then[chain] = (length, found)
    if anchor_of(then) != f"{digest}:{lengths_text}":
        return "the chains did not grow from the anchor: they were rewritten"
    return None


# --- retention and export --------------------------------------------------------------


def prune(session: Session, days: int, now: datetime | None = None) -> int:
    """Remove entries older than `days`, and say so in the trail itself (where each chain
    now starts), so that the chains stay verifiable from the first entry kept, and a removal
    nobody recorded does not pass."""
    cutoff = (now or utcnow()) - timedelta(days=days)
    old = AuditEntry.at < cutoff
    last_of_chain = (
        select(AuditEntry.chain, func.max(AuditEntry.chain_seq).label("chain_seq"))
        .where(old)
        .group_by(AuditEntry.chain)
        .subquery()
    )
    ends = session.execute(
        select(AuditEntry.chain, AuditEntry.chain_seq, AuditEntry.hash).join(
            last_of_chain,
            (AuditEntry.chain == last_of_chain.c.chain)
            & (AuditEntry.chain_seq == last_of_chain.c.chain_seq),
        )
    ).all()
    if not ends:
        return 0
    removed = 0
    for chain, chain_seq, _ in ends:
        result = session.execute(
            delete(AuditEntry).where(AuditEntry.chain == chain, AuditEntry.chain_seq <= chain_seq)
        )
        removed += int(result.rowcount or 0)  # type: ignore[attr-defined]
    note(
        session,
        PRUNE,
        {
            "chains": {str(chain): [chain_seq, digest] for chain, chain_seq, digest in ends},
            "removed": removed,
            "older_than": plain(cutoff),
        },
    )
    session.commit()
    return removed


def export_lines(session: Session, since: datetime | None, until: datetime | None) -> Iterator[str]:
    """JSON Lines, oldest first, for a log system."""
    conditions = []
    if since is not None:
        conditions.append(AuditEntry.at >= since)
    if until is not None:
        conditions.append(AuditEntry.at < until)
    for entry in _entries(session, *conditions):
        yield canonical(as_dict(entry))
