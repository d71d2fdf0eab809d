"""Reserving a DOI for a record, releasing the reservation, and keeping what DataCite is to
hold (`Doi.wanted`) in step with the record.

Every write of a record (create, PATCH, replacement, tus completion, `flask import`, delete,
the release approval) calls `follow` once its changes are set and before it commits, so the
DOI's wanted state and its `due_at` are written in the record's own transaction; after the
commit the outbox worker (app/doi/worker.py) brings DataCite there. Nothing here calls
DataCite.

What DataCite is to hold:
- `findable` while the record is public: released, and with `DATACITE_REGISTER_AT=sperrfrist`
  also past its embargo (with `release` the embargo is DataCite's `Available` date);
- `draft` before it was ever public;
- `registered` (hidden) once it leaves public view (unreleased or deleted): the row keeps when
  and why (`withdrawn_*`) and the title and citation the public last saw, for the tombstone;
  nothing of what the record becomes afterwards is sent (the worker hides the DOI, or
  registers a DOI never registered with the tombstone's metadata);
- `deleted` for a reservation released before registration: the worker deletes the draft at
  DataCite and the row goes.
"""

from __future__ import annotations

import html
import re
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

from flask import current_app
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from app.doi import lookup, payload
from app.exceptions import DomainError
from app.extensions import db
from app.files import access, relations
from app.models import Doi, FileRecord, RecordCitation, Series, utcnow

DRAFT = "draft"
REGISTERED = "registered"
FINDABLE = "findable"
DELETED = "deleted"
#: Session.info key: this transaction made a DOI due (the worker is poked after the commit).
DUE = "doi_due"

#: Crockford's base 32 (no I, L, O, U), and the five more symbols of its check character.
ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
CHECK_SYMBOLS = ALPHABET + "*~$=u"
#: Random characters of a suffix (35 bits), then the check character: "xxxx-xxxx".
SUFFIX_RANDOM = 7
#: Tries before giving up on a free suffix (a collision is one in billions).
SUFFIX_TRIES = 5

#: The stored citation's HTML (app/pages/citation.py): its formatting tags, and the
#: placeholder of its address.
_TAGS = re.compile(r"</?(?:i|b|u|sup|sub|span)(?:\s[^>]*)?>")
_ADDRESS = "\ue0f0"


class DoiExists(DomainError):
    """The record has a DOI already (409)."""

    status = 409


class DoiRegistered(DomainError):
    """The DOI is registered at DataCite: it can no longer be released (409)."""

    status = 409


class DoisOff(DomainError):
    """DOIs are not configured, or the record has none to release (404)."""

    status = 404


def enabled() -> bool:
    return lookup.configured()


def check_char(value: int) -> str:
    """Crockford's check character of `value` (value modulo 37)."""
    return CHECK_SYMBOLS[value % 37]


def new_suffix() -> str:
    """A random, meaningless suffix "xxxx-xxxx": seven base-32 characters and a check
    character, as DataCite's own generator makes them."""
    value = secrets.randbits(5 * SUFFIX_RANDOM)
    chars = "".join(ALPHABET[(value >> (5 * i)) & 31] for i in reversed(range(SUFFIX_RANDOM)))
    text = chars + check_char(value)
    return f"{text[:4]}-{text[4:]}"


def suffix_valid(suffix: str) -> bool:
    """Whether `suffix` is one `new_suffix` could have made (its check character fits)."""
    match = re.fullmatch(
        rf"([{ALPHABET}]{{4}})-([{ALPHABET}]{{3}})([{re.escape(CHECK_SYMBOLS)}])", suffix
    )
    if match is None:
        return False
    value = 0
    for char in match.group(1) + match.group(2):
        value = value * 32 + ALPHABET.index(char)
    return check_char(value) == match.group(3)


def _at_sperrfrist() -> bool:
    return current_app.config.get("DATACITE_REGISTER_AT") == "sperrfrist"


def public(record: FileRecord, on: date | None = None) -> bool:
    """Whether the record's DOI is to be findable now (see the module's docstring): released,
    and with `DATACITE_REGISTER_AT=sperrfrist` its content public too (app/files/access.py)."""
    if _at_sperrfrist():
        return access.public_now(record, on or access.today())
    return access.may_see(None, record)


def ever_public(doi: Doi) -> bool:
    """Whether the DOI was (to be) registered: then it can only be hidden, never deleted."""
    return doi.registered_at is not None or doi.wanted in (FINDABLE, REGISTERED)


def landing_url(record_id: uuid.UUID) -> str:
    """The record's page, where the DOI resolves to (`PUBLIC_BASE_URL` is required with DOIs)."""
    base = (current_app.config.get("PUBLIC_BASE_URL") or "").rstrip("/")
    return f"{base}/records/{record_id}"


def _due(doi: Doi) -> None:
    doi.due_at = utcnow()
    db.session.info[DUE] = True


def _citation(record: FileRecord) -> str | None:
    stored = db.session.get(RecordCitation, record.id)
    if stored is None:
        return None
    language = "en" if current_app.config.get("BABEL_DEFAULT_LOCALE") == "en" else "de"
    text = getattr(stored, language)
    plain = html.unescape(_TAGS.sub("", text))
    return plain.replace(_ADDRESS, landing_url(record.id)).strip()


def _doi_of(record_id: uuid.UUID) -> Doi | None:
    with db.session.no_autoflush:
        doi = db.session.scalars(select(Doi).where(Doi.record_id == record_id)).first()
    return None if doi is None or doi.wanted == DELETED else doi


@dataclass(frozen=True)
class Seen:
    """What the public saw of a record before a write: its tombstone, should the write take
    it out of public view."""

    title: str
    citation: str | None


def public_view(record: FileRecord) -> Seen | None:
    """What the public sees of a DOI-bearing record now (None: nothing, or no DOI); read
    before a write changes it (app/files/writes.py `finish`)."""
    if not enabled() or not public(record) or _doi_of(record.id) is None:
        return None
    with db.session.no_autoflush:
        return Seen((record.titel or record.original_name)[:255], _citation(record))


def follow(record: FileRecord, *, deleted: bool = False, seen: Seen | None = None) -> None:
    """Decide what DataCite is to hold for the record's DOI after this write, and make it
    due, in the caller's transaction (before its commit); `seen` is what the public saw
    before the write. Without DOIs, or without a DOI for the record, nothing happens."""
    if not enabled():
        return
    doi = _doi_of(record.id)
    if doi is None:
        return
    if deleted and not ever_public(doi):
        doi.wanted = DELETED
    elif deleted:
        _withdraw(doi, lookup.DELETED, seen)
        return
    elif public(record):
        doi.wanted = FINDABLE
        doi.withdrawn_at = doi.withdrawn_reason = None
    elif ever_public(doi):
        _withdraw(doi, lookup.UNRELEASED, seen)
        return
    else:
        doi.wanted = DRAFT
    # Due after every write: the worker sends only what changed (the payload's digest).
    _due(doi)


def _withdraw(doi: Doi, reason: str, seen: Seen | None) -> None:
    """The record left public view, or was changed or deleted after it did: the tombstone
    keeps what the public saw last, and DataCite is told once (to hide the DOI); a withdrawn
    record's later edits never reach it."""
    if doi.withdrawn_at is None:
        doi.withdrawn_at = utcnow()
        doi.tombstone_title = seen.title if seen else None
        doi.tombstone_citation = seen.citation if seen else None
    elif doi.wanted == REGISTERED and reason == doi.withdrawn_reason:
        return
    doi.withdrawn_reason = reason
    doi.wanted = REGISTERED
    _due(doi)


def reserve(record: FileRecord, caller_id: int | None) -> Doi:
    """Reserve a DOI for `record` (already checked: its owner or an administrator asks) and
    commit; DataCite gets the draft from the outbox. 409 if it has one."""
    if not enabled():
        raise DoisOff("DOIs are not configured on this service.")
    prefix = current_app.config["DATACITE_PREFIX"].lower()
    for _ in range(SUFFIX_TRIES):
        _refuse_second(record.id)
        doi = Doi(
            doi=f"{prefix}/{new_suffix()}",
            record_id=record.id,
            created_by=caller_id,
            wanted=DRAFT,
            attempts=0,
        )
        try:
            with db.session.begin_nested():
                db.session.add(doi)
                db.session.flush()
        except IntegrityError:
            continue  # the suffix was taken, or another request reserved one: look again
        follow(record)
        db.session.commit()
        return doi
    _refuse_second(record.id)
    raise RuntimeError("no free DOI suffix found")  # pragma: no cover - 35 random bits


def _refuse_second(record_id: uuid.UUID) -> None:
    existing = db.session.scalars(select(Doi).where(Doi.record_id == record_id)).first()
    if existing is not None and existing.wanted != DELETED:
        raise DoiExists(f"The record has the DOI {existing.doi} already.")
    if existing is not None:
        raise DoiExists(
            f"The record's DOI {existing.doi} is being released at DataCite; reserve again "
            "once that is done."
        )


def release(record: FileRecord) -> None:
    """Give up the record's reserved DOI (never registered) and commit: the worker deletes
    the draft at DataCite, then the row. 404 without one, 409 once registered."""
    if not enabled():
        raise DoisOff("DOIs are not configured on this service.")
    doi = db.session.scalars(select(Doi).where(Doi.record_id == record.id)).first()
    if doi is None or doi.wanted == DELETED:
        raise DoisOff("The record has no DOI.")
    if ever_public(doi):
        raise DoiRegistered(
            f"The DOI {doi.doi} is registered at DataCite and stays; it cannot be released."
        )
    doi.wanted = DELETED
    _due(doi)
    db.session.commit()


def mark_embargoes_ended() -> int:
    """With `DATACITE_REGISTER_AT=sperrfrist`: make due the DOIs of released records whose
    embargo is over but whose DOI is not findable yet (the calendar, not a write, changed
    them); returns how many."""
    if not enabled() or current_app.config.get("DATACITE_REGISTER_AT") != "sperrfrist":
        return 0
    rows = db.session.execute(
        select(Doi, FileRecord)
        .join(FileRecord, FileRecord.id == Doi.record_id)
        .where(
            access.downloadable(None, access.today()),
            Doi.wanted.in_((DRAFT, REGISTERED)),
        )
    ).all()
    for _doi, record in rows:
        follow(record)
    db.session.commit()
    return len(rows)


# --- what a record's DataCite metadata takes from other records (issue 49) -----------------


def related_of(
    record: Any,
    found: list[relations.Link] | None = None,
    dois: dict[uuid.UUID, Doi] | None = None,
    landing: Callable[[uuid.UUID], str] = landing_url,
) -> list[dict[str, Any]]:
    """The record's links in DataCite's form, as the public may follow them
    (app/files/relations.py: a link to or from a record the public may not see is left
    out): a linked record by its DOI where it shows one, else by its `landing` page; the
    inverse of other records' links too (`IsPreviousVersionOf` a newer edition). `found`
    and `dois` are its links and their records' DOIs where the caller read them already (a
    page of an OAI-PMH harvest)."""
    if found is None:
        found = relations.links_of(record, None)
    if dois is None:
        dois = lookup.dois_of(link.target.id for link in found if link.target is not None)
    related = []
    for link in found:
        if link.target is None:
            related.append(
                payload.related_identifier(
                    link.relation_type, link.identifier_type, link.identifier
                )
            )
            continue
        doi = lookup.shown(dois.get(link.target.id))
        kind, identifier = ("DOI", doi) if doi else ("URL", landing(link.target.id))
        general = payload.resource_type_general(link.target.mime_type)
        related.append(payload.related_identifier(link.relation_type, kind, identifier, general))
    return related


def series_of(record: Any, base: str | None = None) -> dict[str, Any] | None:
    """The record's series as DataCite's related item (None: none); its page under `base`
    (default `PUBLIC_BASE_URL`)."""
    series = db.session.get(Series, record.series_slug) if record.series_slug else None
    if series is None:
        return None
    if base is None:
        base = (current_app.config.get("PUBLIC_BASE_URL") or "").rstrip("/")
    general = payload.resource_type_general(record.mime_type)
    return payload.series_item(
        series.title, record.series_number, f"{base}/series/{series.slug}", general
    )


def follow_related(record_ids: set[uuid.UUID]) -> None:
    """Make due the DOIs of records whose DataCite metadata a write of another record may
    have changed (what it links to and what links to it): the worker sends only what
    changed. Withdrawn DOIs hold their tombstone and stay as they are."""
    if not enabled() or not record_ids:
        return
    with db.session.no_autoflush:
        found = db.session.scalars(
            select(Doi).where(
                Doi.record_id.in_(record_ids),
                Doi.withdrawn_at.is_(None),
                Doi.wanted.in_((DRAFT, FINDABLE)),
            )
        ).all()
    for doi in found:
        _due(doi)
