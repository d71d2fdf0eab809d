"""The flush: pending download events become per-day counts, by the COUNTER R5 rules.

- Robots (COUNTER robots list) are dropped; machines (its machine list: scripts, `curl`,
  libraries) are counted apart. The machine list is checked first: some agents are on both.
  A User-Agent longer than `MAX_USER_AGENT` is a machine without being matched.
- Double-click: a visitor's request of a record within 30 s of their previous one counts
  nothing, so a player's stream of Range requests counts once (per process; see README).
- Unique: one per visitor per record per day, across replicas, through `stats_visitors`.
- A visitor is the account behind a token, else an HMAC of address and User-Agent under the
  day's salt. At the day's roll-over yesterday's salts and visitor rows are deleted.
- Page views (door `page`) are counted by the same rules with the visitor keyed apart: a view
  never hides a download within 30 s nor takes its `unique`, and the other way round.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import os
import uuid
from collections import Counter
from datetime import UTC, date, datetime
from typing import Any

from counter_robots import is_machine, is_robot
from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite

from app.extensions import db
from app.models import StatsDaily, StatsSalt, StatsVisitor
from app.stats.events import DOUBLE_CLICK_SECONDS, MAX_USER_AGENT, PAGE, Download

log = logging.getLogger(__name__)

#: Events written per transaction.
BATCH = 5000
#: Rows per INSERT statement (SQLite allows 32766 parameters in one).
ROWS_PER_STATEMENT = 500

#: (record, day, door, machine): the key of a `stats_daily` row.
Bucket = tuple[uuid.UUID, date, str, bool]


def day_of(at: float) -> date:
    """Statistics keep UTC days, so every replica and report agrees on where a day ends."""
    return datetime.fromtimestamp(at, UTC).date()


def _insert(table: Any) -> Any:
    dialect = postgresql if db.session.get_bind().dialect.name == "postgresql" else sqlite
    return dialect.insert(table)


def _chunks(rows: list[dict[str, Any]]) -> Any:
    for start in range(0, len(rows), ROWS_PER_STATEMENT):
        yield rows[start : start + ROWS_PER_STATEMENT]


def flush_events(collector: Any) -> int:
    """Write the pending events of `collector` (app/stats/collector.py, which imports this
    module), a batch per transaction; how many were taken.
    A batch that fails goes back to the front of the queue for the next round."""
    taken = 0
    stale = False
    pending = collector.pending
    while pending:
        batch = [pending.popleft() for _ in range(min(BATCH, len(pending)))]
        clicks = collector.clicks.snapshot()
        try:
            stale |= _write(collector, batch)
        except Exception:
            db.session.rollback()
            # Retried as if never seen (in Redis the clicks stay: a retry may count less).
            collector.clicks.restore(clicks)
            pending.extendleft(reversed(batch))
            raise
        taken += len(batch)
    now = collector.clock()
    # A click older than the rule's window decides nothing more: it is forgotten.
    collector.clicks.forget_before(now)
    today = day_of(now)
    if stale or collector.rolled_over_on != today:
        roll_over(collector, today)
    return taken


def _write(collector: Any, batch: list[Download]) -> bool:
    """One batch in one transaction; whether it held events of a day before today."""
    today = day_of(collector.clock())
    salts: dict[date, bytes] = {}
    totals: Counter[Bucket] = Counter()
    first_bucket: dict[tuple[date, uuid.UUID, str], Bucket] = {}
    stale = False
    people = []
    for event in sorted(batch, key=lambda e: e.at):
        machine = _machine_or_robot(event.user_agent)
        if machine is None:
            continue
        day = day_of(event.at)
        stale |= day < today
        people.append((event, day, machine, _visitor(collector, event, day, salts)))
    previous_clicks = collector.clicks.previous(
        [((visitor, event.record_id), event.at) for event, _, _, visitor in people]
    )
    for (event, day, machine, visitor), previous in zip(people, previous_clicks, strict=True):
        # abs(): a replica may flush an earlier click after another flushed a later one.
        if previous is not None and abs(event.at - previous) < DOUBLE_CLICK_SECONDS:
            continue
        bucket = (event.record_id, day, event.door, machine)
        totals[bucket] += 1
        first_bucket.setdefault((day, event.record_id, visitor), bucket)

    uniques: Counter[Bucket] = Counter(
        first_bucket[key] for key in _new_visitors(list(first_bucket))
    )
    _add_to_daily(totals, uniques)
    db.session.commit()

    collector.salts.update(salts)
    return stale


#: The lists are long regular expressions, matched in time proportional to a User-Agent's
#: length: the classifications of the agents seen last are kept (at most this many, each
#: at most `MAX_USER_AGENT` characters), so a browser's many requests are matched once.
KNOWN_AGENTS = 4096


def _agent_kind(user_agent: str) -> bool | None:
    """True: a machine; None: a robot (not counted); False: a person. The machine list is
    checked first: `curl` and other tools are on both. A User-Agent longer than
    `MAX_USER_AGENT` (the collector cuts it one character beyond) is a machine unmatched: no
    browser sends one, and matching it would cost the flush in proportion to its length."""
    if len(user_agent) > MAX_USER_AGENT:
        return True
    if is_machine(user_agent):
        return True
    return None if is_robot(user_agent) else False


#: `_agent_kind`, remembered for the agents seen last (the rule stays a plain function, which
#: mutation testing reaches: docs/mutation.md).
_machine_or_robot = functools.lru_cache(maxsize=KNOWN_AGENTS)(_agent_kind)


def _visitor(collector: Any, event: Download, day: date, new_salts: dict[date, bytes]) -> str:
    """Who asked, as the double-click and unique rules key it; a page view is keyed apart."""
    kind = "view:" if event.door == PAGE else ""
    if event.user_id is not None:
        return f"{kind}account:{event.user_id}"
    salt = collector.salts.get(day) or new_salts.get(day)
    if salt is None:
        salt = new_salts[day] = _salt_of(day)
    message = f"{kind}{event.address}\n{event.user_agent}".encode()
    return hmac.new(salt, message, hashlib.sha256).hexdigest()


def _salt_of(day: date) -> bytes:
    """The day's salt, made by whichever replica needs it first."""
    db.session.execute(
        _insert(StatsSalt.__table__)
        .values(day=day, salt=os.urandom(32))
        .on_conflict_do_nothing(index_elements=["day"])
    )
    return db.session.execute(select(StatsSalt.salt).where(StatsSalt.day == day)).scalar_one()


def _new_visitors(keys: list[tuple[date, uuid.UUID, str]]) -> list[tuple[date, uuid.UUID, str]]:
    """Of these (day, record, visitor), the ones not yet counted that day, now marked."""
    table = StatsVisitor.__table__
    rows = [{"day": d, "record_id": r, "visitor": v} for d, r, v in sorted(keys)]
    new: list[tuple[date, uuid.UUID, str]] = []
    for chunk in _chunks(rows):
        statement = (
            _insert(table)
            .values(chunk)
            .on_conflict_do_nothing(index_elements=["day", "record_id", "visitor"])
            .returning(table.c.day, table.c.record_id, table.c.visitor)
        )
        new.extend(tuple(row) for row in db.session.execute(statement))  # type: ignore[misc]
    return new


def _add_to_daily(totals: Counter[Bucket], uniques: Counter[Bucket]) -> None:
    # In key order, so that concurrent flushes of two replicas lock rows in the same order.
    rows = [
        {
            "record_id": record_id,
            "day": day,
            "door": door,
            "machine": machine,
            "total": count,
            "unique_visitors": uniques[(record_id, day, door, machine)],
        }
        for (record_id, day, door, machine), count in sorted(totals.items())
    ]
    table = StatsDaily.__table__
    for chunk in _chunks(rows):
        statement = _insert(table).values(chunk)
        db.session.execute(
            statement.on_conflict_do_update(
                index_elements=["record_id", "day", "door", "machine"],
                set_={
                    "total": table.c.total + statement.excluded.total,
                    "unique_visitors": table.c.unique_visitors + statement.excluded.unique_visitors,
                },
            )
        )


def roll_over(collector: Any, today: date) -> None:
    """Destroy everything per visitor from before today: the salts (so yesterday's hashes
    can no longer be recomputed from an address) and the visitor rows."""
    if db.session.get_bind().dialect.name == "sqlite":
        if not _delete_and_wipe_on_sqlite(today):
            return  # the write-ahead log is still read: the next flush tries again
    else:
        db.session.execute(delete(StatsVisitor).where(StatsVisitor.day < today))
        db.session.execute(delete(StatsSalt).where(StatsSalt.day < today))
        db.session.commit()
    collector.salts = {day: salt for day, salt in collector.salts.items() if day >= today}
    collector.rolled_over_on = today


def _delete_and_wipe_on_sqlite(today: date) -> bool:
    """The deletion on SQLite, leaving no copy of a salt in the database's files: SQLite keeps
    a deleted row's bytes in its page until the page is reused, and every page version it
    wrote in the write-ahead log (`-wal`) until the log is reset. `secure_delete` overwrites
    the deleted rows with zeros, and a TRUNCATE checkpoint copies those pages into the
    database and empties the log. Whether the log was emptied (readers may hold it)."""
    with db.engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA secure_delete=ON")
        connection.commit()
        try:
            with connection.begin():
                connection.execute(delete(StatsVisitor).where(StatsVisitor.day < today))
                connection.execute(delete(StatsSalt).where(StatsSalt.day < today))
            busy, _, _ = connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()
            connection.commit()
        finally:
            connection.exec_driver_sql("PRAGMA secure_delete=OFF")
            connection.commit()
    if busy:
        log.warning("the statistics salts were deleted; the write-ahead log is busy, retrying")
    return not busy
