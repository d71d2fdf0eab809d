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
from app.schemas.field_types import format_timestamp, parse_since

PRUNE = "audit.prune"
#: How far the clocks of the writers and of verify may disagree: a prune dated later than
#: verify's clock by more than this is forged.
SKEW = timedelta(minutes=5)


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


def history(
    session: Session, record_id: uuid.UUID, after_seq: int | None, limit: int
) -> tuple[list[AuditEntry], int | None]:
    """A page of one record's entries, oldest first, and the sequence number the next page
    starts after (its owner can add one with every PATCH: it is paged like the trail)."""
    query = (
        select(AuditEntry)
        .where(AuditEntry.record_id == record_id)
        .order_by(AuditEntry.seq)
        .limit(limit + 1)
    )
    if after_seq is not None:
        query = query.where(AuditEntry.seq > after_seq)
    entries = list(session.scalars(query))
    if len(entries) > limit:
        return entries[:limit], entries[limit - 1].seq
    return entries, None


# --- the chains' check ----------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    ok: bool
    checked: int
    anchor: str
    problem: str | None = None
    seq: int | None = None
    note: str | None = None


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


@dataclass(frozen=True)
class Pruned:
    """A recorded prune: when it ran, and whether it is of the kind verify can check against
    the retention (one that kept each chain's newest old entry, `first_kept`)."""

    seq: int
    at: datetime
    checkable: bool


def _pruned(session: Session) -> dict[tuple[int, int, str], Pruned]:
    """Where recorded prunes left each chain: (chain, last removed chain_seq, its hash)."""
    found = {}
    for seq, at, changes in session.execute(
        select(AuditEntry.seq, AuditEntry.at, AuditEntry.changes).where(AuditEntry.action == PRUNE)
    ):
        recorded = json.loads(changes)
        for chain, (chain_seq, digest) in recorded["chains"].items():
            found[(int(chain), int(chain_seq), str(digest))] = Pruned(
                seq, at, "first_kept" in recorded
            )
    return found


def _prune_fits(entry: AuditEntry, prune: Pruned, retention_days: int, now: datetime) -> str | None:
    """Whether a prune that left `entry` first in its chain fits the retention. A prune keeps
    each chain's newest entry older than its cutoff and removes those before it, which were
    written before it (a chain is appended to in order under its head's lock): so the first
    entry kept, whose time its hash and its successors' prove, must have been older than the
    retention at the prune's time, and the prune no later than now.

    A prune written before issue 36 removed every old entry, so the entry after it was young
    then: it is accepted once that entry is older than the retention now (what was removed
    before it is older still), and is an "unchecked prune" until then."""
    retention = timedelta(days=retention_days)
    if not prune.checkable:
        if entry.at < now - retention:
            return None
        return (
            f"chain {entry.chain}: the entries before entry {entry.seq} were removed by the "
            f"prune at entry {prune.seq}, which does not show that the retention allowed it "
            f"(an unchecked prune: entry {entry.seq} is younger than {retention_days} days)"
        )
    if prune.at > now + SKEW:
        return f"the prune at entry {prune.seq} is dated in the future"
    if entry.at >= prune.at - retention:
        return (
            f"chain {entry.chain}: the prune at entry {prune.seq} removed entries written "
            f"before entry {entry.seq} of {format_timestamp(entry.at)}, younger than the "
            f"retention of {retention_days} days at the prune's time {format_timestamp(prune.at)}"
        )
    return None


#: The form of what `anchor_of` returns, and after `@` the time it was taken (an anchor
#: printed before issue 36 has none: still accepted, see `_against_anchor`).
ANCHOR = re.compile(
    r"[0-9a-f]{64}:[0-9]+(,[0-9]+)*(@[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z)?"
)


def anchor_of(heads: dict[int, tuple[int, str]]) -> str:
    """One line naming every chain's head (its length, and a digest of all their hashes), to
    keep outside the database: a later verify checks that the chains grew from there."""
    digest = hashlib.sha256(
        canonical([heads[chain][1] for chain in sorted(heads)]).encode()
    ).hexdigest()
    return f"{digest}:{','.join(str(heads[chain][0]) for chain in sorted(heads))}"


def verify(
    session: Session,
    anchor: str | None = None,
    retention_days: int = 395,
    now: datetime | None = None,
) -> Verdict:
    """Walk every chain; the first entry found altered, removed or inserted is the verdict.

    A chain may start after entry 1 only where a recorded prune ended it, and only if that
    prune fits `retention_days` (`_prune_fits`). `anchor` is a value an earlier verify printed:
    then the chains must have grown from the heads it names (each head still in place,
    unchanged, or removed by a prune the retention allowed)."""
    now = now or utcnow()
    heads = {
        head.id: (head.last_seq, head.last_hash) for head in session.scalars(select(AuditChainHead))
    }
    checked = 0

    def bad(problem: str, seq: int | None) -> Verdict:
        return Verdict(False, checked, "", problem, seq)

    pruned = _pruned(session)
    # Of each chain that starts after a prune: its first entry's place, and that prune.
    starts: dict[int, tuple[int, Pruned]] = {}
    seen: dict[int, tuple[int, str]] = {chain: (0, GENESIS) for chain in heads}
    expected: tuple[int, int, str] | None = None  # chain, chain_seq, prev_hash
    last_seq_in_chain = 0

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
            elif prune := pruned.get((entry.chain, entry.chain_seq - 1, entry.prev_hash)):
                if problem := _prune_fits(entry, prune, retention_days, now):
                    return bad(problem, entry.seq)
                starts[entry.chain] = (entry.chain_seq, prune)
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
    note = None
    if anchor is not None:
        problem, note = _against_anchor(session, anchor, heads, starts, retention_days)
        if problem:
            return bad(problem, None)
    taken = format_timestamp(now).split(".")[0] + "Z"
    return Verdict(True, checked, f"{anchor_of(heads)}@{taken}", note=note)


def _against_anchor(
    session: Session,
    anchor: str,
    heads: dict[int, tuple[int, str]],
    starts: dict[int, tuple[int, Pruned]],
    retention_days: int,
) -> tuple[str | None, str | None]:
    """Whether each chain still holds, at the length the anchor names, the entry it had (a
    problem, or None and a note).

    An anchored entry gone from the start of its chain counts only as the retention allowed
    it: the prune that left the chain starting after it kept an entry written after the
    anchor was taken (the anchored entry was then the head), which was older than the
    retention at the prune's time; so the prune must be at least the retention later than
    the anchor's time. An anchor without a time (printed before issue 36) cannot show that,
    and fails. The anchor then no longer pins the other chains (its digest needs every head's
    hash): the note says so."""
    heads_text, _, taken_text = anchor.partition("@")
    digest, _, lengths_text = heads_text.partition(":")
    try:
        lengths = [int(n) for n in lengths_text.split(",")]
        taken = parse_since(taken_text) if taken_text else None
    except ValueError:
        return "the anchor is not one that `flask audit verify` printed", None
    if len(lengths) != len(heads):
        return "the anchor names another number of chains", None
    then: dict[int, tuple[int, str]] = {}
    outlived: list[int] = []
    for chain, length in zip(sorted(heads), lengths, strict=True):
        if length == 0:
            then[chain] = (0, GENESIS)
            continue
        found = session.scalar(
            select(AuditEntry.hash).where(AuditEntry.chain == chain, AuditEntry.chain_seq == length)
        )
        if found is not None:
            then[chain] = (length, found)
            continue
        first_kept, prune = starts.get(chain, (0, None))
        if prune is None or length >= first_kept:
            return f"chain {chain} no longer holds its entry {length} named by the anchor", None
        if taken is None:
            return (
                f"chain {chain}: the prune at entry {prune.seq} removed entry {length} named "
                "by the anchor, and the anchor carries no time to show that the retention "
                "allowed it",
                None,
            )
        if prune.at < taken + timedelta(days=retention_days) - SKEW:
            return (
                f"chain {chain}: the prune at entry {prune.seq} removed entry {length} named "
                f"by the anchor of {format_timestamp(taken)}, before the retention of "
                f"{retention_days} days allowed it",
                None,
            )
        outlived.append(chain)
    if outlived:
        chains = ", ".join(str(chain) for chain in outlived)
        return None, (
            f"the anchor's entries of chain(s) {chains} were pruned under the retention, so "
            "it no longer pins the chains: keep a newer anchor"
        )
    if anchor_of(then) != f"{digest}:{lengths_text}":
        return "the chains did not grow from the anchor: they were rewritten", None
    return None, None


# --- retention and export --------------------------------------------------------------


def prune(session: Session, days: int, now: datetime | None = None) -> int:
    """Remove entries older than `days` but the newest such entry of each chain, and say so in
    the trail itself: where each chain now starts (its last removed entry and that entry's
    hash, `chains`; the entry kept, `first_kept`). The entry kept is the proof, for verify,
    that what was removed was older than the retention: its time is covered by its hash and
    the chain after it. A removal nobody recorded, or one the retention did not allow, does
    not pass."""
    cutoff = (now or utcnow()) - timedelta(days=days)
    newest_old = (
        select(AuditEntry.chain, func.max(AuditEntry.chain_seq).label("chain_seq"))
        .where(AuditEntry.at < cutoff)
        .group_by(AuditEntry.chain)
        .subquery()
    )
    kept = session.execute(
        select(AuditEntry.chain, AuditEntry.chain_seq, AuditEntry.prev_hash, AuditEntry.hash)
        .join(
            newest_old,
            (AuditEntry.chain == newest_old.c.chain)
            & (AuditEntry.chain_seq == newest_old.c.chain_seq),
        )
        .order_by(AuditEntry.chain)
    ).all()
    removed = 0
    chains: dict[str, list[Any]] = {}
    first_kept: dict[str, list[Any]] = {}
    for chain, chain_seq, prev_hash, digest in kept:
        result = session.execute(
            delete(AuditEntry).where(AuditEntry.chain == chain, AuditEntry.chain_seq < chain_seq)
        )
        count = int(result.rowcount or 0)  # type: ignore[attr-defined]
        if count:
            removed += count
            chains[str(chain)] = [chain_seq - 1, prev_hash]
            first_kept[str(chain)] = [chain_seq, digest]
    if not removed:
        session.rollback()
        return 0
    note(
        session,
        PRUNE,
        {
            "chains": chains,
            "first_kept": first_kept,
            "removed": removed,
            "older_than": plain(cutoff),
            "days": days,
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
