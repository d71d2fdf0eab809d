"""Outboxes: rows written in the transaction of what they tell about (release mail, DOIs owed
to DataCite) and worked after its commit by one loop, claim → send → back off.

Each due row is claimed first (its due time moved ahead by `CLAIM` with a conditional UPDATE),
so two workers never send one row twice; a worker that crashes leaves its claim to expire,
one that is stopped (Ctrl-C, SIGTERM) hands it back. Any error of one row is that row's
failed try (`attempts`, `last_error`, due again after a back-off doubling from the retry
setting) and the pass goes on with the next. A thread per process works each outbox after a
commit that made something due, and when the next retry falls due; the command line does the
same (cron). A request never waits for it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from flask import Flask, current_app
from sqlalchemy import ColumnElement, select, true, update

from app.extensions import db
from app.models import utcnow

log = logging.getLogger(__name__)
#: How long a worker holds a row it took before another may try it (it crashed meanwhile).
CLAIM = timedelta(minutes=5)


@dataclass(frozen=True)
class Worked:
    done: int
    failed: int
    #: Seconds until the next retry is due, if one is.
    next_due: float | None


@dataclass(frozen=True)
class Outbox:
    """One outbox table: `key` its primary key, `due` when a row is due, `waiting` which rows
    still wait at all; `send(row, claim)` does one row's work and notes its success on it (it
    raises on failure); the back-off starts at the `retry` setting, at most `retry_max`'s."""

    name: str
    model: Any
    key: Any
    due: Any
    send: Callable[[Any, datetime], None]
    retry: str
    retry_max: str | None = None
    waiting: Callable[[], ColumnElement[bool]] = true
    #: How a failure reads in `last_error`.
    error_text: Callable[[Exception], str] = lambda exc: (str(exc) or type(exc).__name__)[:2000]

    def work(self, limit: int = 100) -> Worked:
        """Send what is due now, each row claimed first."""
        now = utcnow()
        due = db.session.scalars(
            select(self.key)
            .where(self.waiting(), self.due <= now)
            .order_by(self.due, self.key)
            .limit(limit)
        ).all()
        db.session.rollback()
        done = failed = 0
        for key in due:
            claim = utcnow() + CLAIM
            claimed = db.session.execute(
                update(self.model)
                .where(self.key == key, self.waiting(), self.due <= now)
                .values({self.due.key: claim})
            )
            db.session.commit()
            if claimed.rowcount != 1:
                continue
            row = db.session.get(self.model, key)
            try:
                self.send(row, claim)
            except Exception as exc:  # noqa: BLE001 - any error is this row's failed try
                db.session.rollback()
                self._failed(key, claim, exc)
                failed += 1
                continue
            except BaseException:
                db.session.rollback()
                self._hand_back(key, claim)
                raise
            db.session.commit()
            done += 1
        soonest = db.session.scalar(
            select(self.due).where(self.waiting(), self.due.is_not(None)).order_by(self.due)
        )
        db.session.rollback()
        next_due = None if soonest is None else max(0.0, (soonest - utcnow()).total_seconds())
        return Worked(done, failed, next_due)

    def _failed(self, key: Any, claim: datetime, exc: Exception) -> None:
        row = db.session.get(self.model, key)
        if row is None:
            return
        config = current_app.config
        row.attempts += 1
        delay = config[self.retry] * 2 ** (row.attempts - 1)
        if self.retry_max is not None:
            delay = min(delay, config[self.retry_max])
        row.last_error = self.error_text(exc)
        if hasattr(row, "last_attempt_at"):
            row.last_attempt_at = utcnow()
        # Only a row still under this worker's claim waits; one made due again is due now.
        if getattr(row, self.due.key) == claim:
            setattr(row, self.due.key, utcnow() + timedelta(seconds=delay))
        db.session.commit()
        log.warning("%s %s failed (try %s): %s", self.name, key, row.attempts, row.last_error)

    def _hand_back(self, key: Any, claim: datetime) -> None:
        """A worker stopped while sending: the row is due again at once, not at its claim's
        end (it may have gone out; the next try sends it at most once more)."""
        db.session.execute(
            update(self.model)
            .where(self.key == key, self.due == claim)
            .values({self.due.key: utcnow()})
        )
        db.session.commit()


class OutboxThread:
    """Works an outbox in an app context of its own: started on the first poke, poked after a
    commit that made something due, and waking by itself when the next retry falls due; an
    error is logged and retried later, never the end of the thread."""

    def __init__(self, app: Flask, outbox: Outbox, work: Callable[[], Worked] | None = None):
        self.app = app
        self.name = f"{outbox.name}-outbox"
        self.outbox = outbox
        self.work = work or outbox.work
        self.wake = threading.Event()
        #: Set while the thread waits between passes (holding no connection).
        self.idle = threading.Event()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def poke(self) -> None:
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self.thread.start()
        self.idle.clear()
        self.wake.set()

    def _run(self) -> None:
        wait: float | None = None
        while True:
            if not self.wake.is_set():
                self.idle.set()
            self.wake.wait(timeout=wait)
            self.idle.clear()
            self.wake.clear()
            with self.app.app_context():
                try:
                    wait = self.work().next_due
                except Exception:  # noqa: BLE001 - the thread must live on; logged
                    log.exception("working the outbox of thread %s failed", self.name)
                    wait = self.app.config[self.outbox.retry]
                finally:
                    db.session.remove()
