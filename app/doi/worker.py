"""The DOI outbox worked off: bring DataCite to what each due `Doi` row wants.

A row is due (`due_at` set, in the record's own transaction: app/doi/services.py). After a
commit that made one due, the process's outbox thread works it (app/outbox.py, the loop mail
shares); `flask doi work` does the same from cron. After the call the row is cleared only if no
write made it due again meanwhile. A failure (DataCite down, slow, or refusing the payload) is
kept in `last_error` and retried after `DOI_RETRY_SECONDS`, doubling each time up to
`DOI_RETRY_MAX_SECONDS`: nothing is lost and no request waits. An update is sent only when the
payload's digest differs from the one DataCite last accepted (`payload_hash`). Of a withdrawn
record nothing but the tombstone reaches DataCite: a findable DOI is hidden (the event alone),
one never registered is registered with the tombstone's metadata.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from flask import Flask, current_app, has_app_context
from sqlalchemy import delete, event, select, update
from sqlalchemy.orm import Session

import app.doi.services as services
from app.doi import payload
from app.doi.services import DELETED, DRAFT, FINDABLE, REGISTERED
from app.extensions import db
from app.models import Doi, FileRecord, utcnow
from app.outbox import Outbox, OutboxThread, Worked


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
    attributes = payload.attributes(
        record,
        doi.doi,
        landing_url=services.landing_url(record.id),
        publisher=current_app.config["REPOSITORY_NAME"],
        available=record.sperrfrist,
        related=services.related_of(record),
        series=services.series_of(record),
    )
    payload.validate(attributes)
    return attributes


def _bring(doi: Doi, record: FileRecord | None) -> None:
    """One row's calls to DataCite, from what it holds (`state`) to what is wanted; the row's
    columns follow each confirmed step."""
    if doi.wanted == DELETED:
        if doi.state is not None:
            client().delete(doi.doi)
        doi.state = DELETED
        return
    if doi.withdrawn_at is not None or record is None:
        _withdraw(doi)
        return
    attributes = _attributes(record, doi)
    digest = payload.digest(attributes)
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
    else:
        datacite.update(doi.doi, attributes, "register")
        doi.registered_at = doi.registered_at or utcnow()
    doi.state, doi.payload_hash = doi.wanted, digest


def _withdraw(doi: Doi) -> None:
    """A withdrawn record's DOI at DataCite: hidden, or registered (hidden) with the
    tombstone's metadata if it never was, so that the DOI its tombstone shows resolves."""
    if doi.state == FINDABLE:
        client().hide(doi.doi)
    elif doi.state != REGISTERED:
        withdrawn = doi.withdrawn_at or datetime.now(UTC)
        attributes = payload.tombstone(
            doi.doi,
            doi.tombstone_title,
            withdrawn.astimezone(UTC).date(),
            landing_url=services.landing_url(doi.record_id),
            publisher=current_app.config["REPOSITORY_NAME"],
        )
        payload.validate(attributes)
        if doi.state is None:
            client().create_draft(doi.doi, attributes)
        client().update(doi.doi, attributes, "register")
        doi.payload_hash = payload.digest(attributes)
        doi.registered_at = doi.registered_at or utcnow()
    doi.state = REGISTERED


def _send(doi: Doi, claim: datetime) -> None:
    _bring(doi, db.session.get(FileRecord, doi.record_id))
    _finish(doi, claim)


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


def _error_text(exc: Exception) -> str:
    status = getattr(exc, "status", None)
    messages = getattr(exc, "messages", None)
    if status is not None and messages:
        return f"DataCite answered {status}: {'; '.join(str(m) for m in messages)}"[:2000]
    return (str(exc) or type(exc).__name__)[:2000]


OUTBOX = Outbox(
    name="doi",
    model=Doi,
    key=Doi.doi,
    due=Doi.due_at,
    send=_send,
    retry="DOI_RETRY_SECONDS",
    retry_max="DOI_RETRY_MAX_SECONDS",
    error_text=_error_text,
)


def work_due(limit: int = 100) -> Worked:
    """Work the due rows (app/outbox.py); nothing while DOIs are off."""
    if not services.enabled():
        return Worked(0, 0, None)
    return OUTBOX.work(limit)


def pending() -> list[Doi]:
    """The DOIs still due (waiting or failing), oldest first, for `flask doi status`."""
    return list(db.session.scalars(select(Doi).where(Doi.due_at.is_not(None)).order_by(Doi.due_at)))


class Worker(OutboxThread):
    """The process's thread that works the DOI outbox after a commit made a DOI due, and when
    a retry falls due."""

    def __init__(self, app: Flask) -> None:
        super().__init__(app, OUTBOX, work_due)


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
