"""The DOI outbox worked off: bring DataCite to what each due `Doi` row wants.

A row is due (`due_at` set, in the record's own transaction: app/doi/services.py). After a
commit that made one due, a thread of the process works the outbox (`Worker`, like the mail
outbox's `Postman`); `flask doi work` does the same from cron. Each row is claimed first (its
`due_at` moved ahead by `CLAIM` with a conditional UPDATE), so two processes never send one
change twice; after the call the row is cleared only if no write made it due again meanwhile.
A failure (DataCite down, slow, or refusing the payload) is kept in `last_error` and retried
after `DOI_RETRY_SECONDS`, doubling each time up to `DOI_RETRY_MAX_SECONDS`: nothing is lost
and no request waits. An update is sent only when the payload's digest differs from the one
DataCite last accepted (`payload_hash`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from flask import Flask, current_app, has_app_context
from sqlalchemy import delete, event, select, update
from sqlalchemy.orm import Session

import app.doi.services as services
from app.doi.services import DELETED, DRAFT, FINDABLE, REGISTERED
from app.extensions import db
from app.models import Doi, FileRecord, utcnow
from app.outbox import OutboxThread

log = logging.getLogger(__name__)
#: How long a worker holds a row it took before another may try it (it crashed meanwhile).
CLAIM = timedelta(minutes=5)


def client() -> Any:
    """The DataCite client (app/doi/client.py), one per process."""
    found = current_app.extensions.get("datacite")
    if found is None:
        from app.doi.client import DataCite

        config = current_app.config
        found = DataCite(
            config["DATACITE_URL"],
            config["DATACITE_REPOSITORY"],
            config["DATACITE_PASSWORD"],
            config["DATACITE_TIMEOUT_SECONDS"],
        )
        current_app.extensions["datacite"] = found
    return found


def _attributes(record: FileRecord, doi: Doi) -> dict[str, Any]:
    from app.doi import payload

    attributes = payload.attributes(
        record,
        doi.doi,
        landing_url=services.landing_url(record.id),
        publisher=current_app.config["REPOSITORY_NAME"],
        available=record.sperrfrist,
    )
    payload.validate(attributes)
    return attributes


def _digest(attributes: dict[str, Any]) -> str:
    from app.doi import payload

    return payload.digest(attributes)


def _bring(doi: Doi, record: FileRecord | None) -> None:
    """One row's calls to DataCite, from what it holds (`state`) to what is wanted; the row's
    columns follow each confirmed step."""
    if doi.wanted == DELETED:
        if doi.state is not None:
            client().delete(doi.doi)
        doi.state = DELETED
        return
    if record is None:  # deleted: only hiding is left (and never without a DataCite DOI)
        if doi.state in (None, DRAFT):
            raise LookupError("the record is gone before its DOI was registered")
        if doi.state == FINDABLE:
            client().hide(doi.doi)
        doi.state = REGISTERED
        return
    attributes = _attributes(record, doi)
    digest = _digest(attributes)
    datacite = client()
    if doi.state is None:
        datacite.create_draft(doi.doi, attributes)
        doi.state, doi.payload_hash = DRAFT, digest
    if doi.wanted == doi.state and digest == doi.payload_hash:
        return
    if doi.wanted == DRAFT:
        datacite.update(doi.doi, attributes, None)
    elif doi.wanted == FINDABLE:
        datacite.update(doi.doi, attributes, "publish")
        doi.registered_at = doi.registered_at or utcnow()
    elif doi.state == FINDABLE:
        datacite.update(doi.doi, attributes, "hide")
    else:
        datacite.update(doi.doi, attributes, "register")
        doi.registered_at = doi.registered_at or utcnow()
    doi.state, doi.payload_hash = doi.wanted, digest


def _error_text(exc: Exception) -> str:
    status = getattr(exc, "status", None)
    messages = getattr(exc, "messages", None)
    if status is not None and messages:
        return f"DataCite answered {status}: {'; '.join(str(m) for m in messages)}"[:2000]
    return (str(exc) or type(exc).__name__)[:2000]


@dataclass(frozen=True)
class Worked:
    done: int
    failed: int
    #: Seconds until the next retry is due, if one is.
    next_due: float | None


def work_due(limit: int = 100) -> Worked:
    """Work the due rows, each claimed first; see the module's docstring."""
    if not services.enabled():
        return Worked(0, 0, None)
    config = current_app.config
    now = utcnow()
    due = db.session.scalars(
        select(Doi.doi).where(Doi.due_at <= now).order_by(Doi.due_at).limit(limit)
    ).all()
    db.session.rollback()
    done = failed = 0
    for name in due:
        claim = utcnow() + CLAIM
        claimed = db.session.execute(
            update(Doi).where(Doi.doi == name, Doi.due_at <= now).values(due_at=claim)
        )
        db.session.commit()
        if claimed.rowcount != 1:
            continue
        doi = db.session.get(Doi, name)
        assert doi is not None
        record = db.session.get(FileRecord, doi.record_id)
        try:
            _bring(doi, record)
        except Exception as exc:  # noqa: BLE001 - DataCite's errors, kept for `doi status`
            if not _retryable(exc):
                raise
            # What DataCite confirmed before the failing call (a draft created) stays.
            delay = min(
                config["DOI_RETRY_SECONDS"] * 2**doi.attempts, config["DOI_RETRY_MAX_SECONDS"]
            )
            doi.attempts += 1
            doi.last_error = _error_text(exc)
            doi.last_attempt_at = utcnow()
            # Only a row still under this worker's claim waits; one due again is due now.
            if doi.due_at == claim:
                doi.due_at = utcnow() + timedelta(seconds=delay)
            failed += 1
            log.warning("DOI %s: DataCite call failed (try %s): %s", name, doi.attempts, exc)
            db.session.commit()
            continue
        done += 1
        _finish(doi, claim)
    soonest = db.session.scalar(select(Doi.due_at).order_by(Doi.due_at).limit(1))
    db.session.rollback()
    next_due = None if soonest is None else max(0.0, (soonest - utcnow()).total_seconds())
    return Worked(done, failed, next_due)


def _finish(doi: Doi, claim: Any) -> None:
    """Keep what DataCite confirmed; clear the row's `due_at` unless a write made it due
    again while the call ran (then the next pass sends that change)."""
    values = {
        "state": doi.state,
        "payload_hash": doi.payload_hash,
        "registered_at": doi.registered_at,
        "attempts": 0,
        "last_error": None,
        "last_attempt_at": utcnow(),
    }
    name = doi.doi
    db.session.expire(doi)
    if values["state"] == DELETED:
        db.session.execute(delete(Doi).where(Doi.doi == name, Doi.wanted == DELETED))
        db.session.commit()
        return
    db.session.execute(update(Doi).where(Doi.doi == name).values(**values))
    db.session.execute(update(Doi).where(Doi.doi == name, Doi.due_at == claim).values(due_at=None))
    db.session.commit()


def _retryable(exc: Exception) -> bool:
    """DataCite's errors (unavailable, rejected), an invalid payload, a gone record: kept
    in `last_error`; anything else is a bug and raises."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(
        names & {"DataCiteUnavailable", "DataCiteRejected", "InvalidPayload", "LookupError"}
    )


def pending() -> list[Doi]:
    """The DOIs still due (waiting or failing), oldest first, for `flask doi status`."""
    return list(db.session.scalars(select(Doi).where(Doi.due_at.is_not(None)).order_by(Doi.due_at)))


class Worker(OutboxThread):
    """The process's thread that works the DOI outbox after a commit made a DOI due, and when
    a retry falls due."""

    def __init__(self, app: Flask) -> None:
        super().__init__(app, "doi-outbox", lambda: work_due().next_due, "DOI_RETRY_SECONDS")


def _after_commit(session: Session) -> None:
    if session.info.pop(services.DUE, False) and has_app_context():
        worker = current_app.extensions.get("doi.worker")
        if worker is not None:
            worker.poke()


def _forget(session: Session, *_args: Any) -> None:
    session.info.pop(services.DUE, None)


def init_app(app: Flask) -> None:
    if app.config["DOI_BACKGROUND"] and app.config.get("DATACITE_URL"):
        app.extensions["doi.worker"] = Worker(app)
    if event.contains(Session, "after_commit", _after_commit):
        return
    event.listen(Session, "after_commit", _after_commit)
    event.listen(Session, "after_rollback", _forget)
