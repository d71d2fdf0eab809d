"""Database models: users, their API tokens and the file records."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Date,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    TypeDecorator,
    Uuid,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.extensions import db


def utcnow() -> datetime:
    return datetime.now(UTC)


class VersionState(StrEnum):
    """A `file_versions` row: a version a replacement ended, or the draft of what a released
    record's editors want it to become (app/files/approval.py)."""

    ENDED = "ended"
    DRAFT = "draft"


class RequestKind(StrEnum):
    """What a release request asks for (app/files/approval.py)."""

    #: Make an unreleased record public (`freigabe` true).
    RELEASE = "release"
    #: Put a released record's draft in place: new content or public fields.
    CHANGE = "change"
    #: A change of a released record that only moves its embargo earlier.
    SPERRFRIST = "sperrfrist"


class RequestState(StrEnum):
    """Where a release request stands: only a pending one can move, and only once."""

    PENDING = "pending"
    APPROVED = "approved"
    DECLINED = "declined"
    CANCELLED = "cancelled"


class CoverOrigin(StrEnum):
    """Where a record's cover comes from (app/covers)."""

    #: Derived from the bytes of the record's content (or of its draft's, waiting).
    CONTENT = "content"
    #: Uploaded by the record's owner; it wins over the derived one.
    OWNER = "owner"


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on every backend (SQLite keeps no offset of its own)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: object) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        value = value.astimezone(UTC)
        if getattr(dialect, "name", None) == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: object) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class User(db.Model):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # Stored lower-cased, so uniqueness is case-insensitive on every backend.
    email: Mapped[str] = mapped_column(String(255), unique=True)
    name: Mapped[str] = mapped_column(String(255))
    password_hash: Mapped[str] = mapped_column(String(255))
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    is_active: Mapped[bool] = mapped_column(Boolean, default=True)
    #: May approve release requests of others (RELEASE_APPROVAL, app/releases); granted by an
    #: operator command only. Administrators may approve without it.
    is_approver: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    tokens: Mapped[list[ApiToken]] = relationship(
        back_populates="user", cascade="all, delete-orphan", passive_deletes=True
    )


class ApiToken(db.Model):
    """A personal access token; only the SHA-256 of its secret is kept."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(255))
    token_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime, index=True)

    user: Mapped[User] = relationship(back_populates="tokens")


class PublicFields:
    """The public fields a record and each of its versions carry beside the content's
    (app/files/versions.py `METADATA`, with `reihenfolge`, which is required on the record)."""

    aktiv_id: Mapped[str | None] = mapped_column(String(255))
    path: Mapped[str | None] = mapped_column(String(255))
    reprotyp: Mapped[str | None] = mapped_column(String(255))
    titel: Mapped[str | None] = mapped_column(String(255))
    beschreibung: Mapped[str | None] = mapped_column(Text)
    autoren: Mapped[str | None] = mapped_column(String(255))
    sachschlagwoerter: Mapped[str | None] = mapped_column(String(255))
    org_themen: Mapped[str | None] = mapped_column(String(255))
    sperrfrist: Mapped[date | None] = mapped_column(Date)
    #: Who made it and what it belongs to (issue 49, app/schemas/attribution.py): the
    #: structured creators and the related identifiers as canonical JSON text (None: none;
    #: `autoren` is then the whole statement of authors), the series and the number in it.
    creators: Mapped[str | None] = mapped_column(Text)
    related_identifiers: Mapped[str | None] = mapped_column(Text)
    series_slug: Mapped[str | None] = mapped_column(String(64))
    series_number: Mapped[str | None] = mapped_column(String(64))


class FileRecord(PublicFields, db.Model):
    __tablename__ = "file_records"
    __table_args__ = (
        # Lists: newest first with id as tie-breaker, per owner, per release state.
        Index("ix_file_records_created", "created_at", "id"),
        Index("ix_file_records_user_created", "user_id", "created_at", "id"),
        Index("ix_file_records_freigabe_created", "freigabe", "created_at", "id"),
        # Prefix search on path; text_pattern_ops lets PostgreSQL use it for LIKE 'x%'.
        # Also serves one folder's records newest first (path equal, release state equal),
        # which is how path-filtered lists are read at scale (see services.path_groups).
        Index(
            "ix_file_records_path",
            "path",
            "freigabe",
            "created_at",
            "id",
            postgresql_ops={"path": "text_pattern_ops"},
        ),
        Index("ix_file_records_aktiv_id", "aktiv_id"),
        Index("ix_file_records_reprotyp", "reprotyp"),
        # The bulk import skips content the owner already has.
        Index("ix_file_records_user_checksum", "user_id", "checksum_sha256"),
        # One record per object; reconciliation looks records up by their object key.
        Index("ix_file_records_stored_path", "stored_path", unique=True),
        # OAI-PMH harvests released records in datestamp order (app/oai). The condition is
        # written as `access.visible(None)` compiles it, so that the planners match it.
        Index(
            "ix_file_records_released_updated",
            "updated_at",
            "id",
            postgresql_where=text("freigabe IS true"),
            sqlite_where=text("freigabe IS 1"),
        ),
        # Feeds list the embargoes that ended most recently (app/feeds).
        Index("ix_file_records_sperrfrist", "sperrfrist"),
        # A series' page and feed read its records newest first (app/pages/series.py).
        Index("ix_file_records_series", "series_slug", "created_at", "id"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="RESTRICT"))
    stored_path: Mapped[str] = mapped_column(String(512))
    checksum_sha256: Mapped[str] = mapped_column(String(64))

    original_name: Mapped[str] = mapped_column(String(255))
    mime_type: Mapped[str] = mapped_column(String(255))
    size: Mapped[int] = mapped_column(BigInteger)

    reihenfolge: Mapped[int] = mapped_column(Integer, default=0)
    freigabe: Mapped[bool] = mapped_column(Boolean, default=True)
    erstellt_von: Mapped[str | None] = mapped_column(String(255))
    freigegeben_von: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    #: 1 at creation, +1 for each replacement that changes the bytes (app/files/versions.py).
    version: Mapped[int] = mapped_column(Integer, default=1, server_default=text("1"))
    #: Whether the current content has been publicly downloadable at some moment (released,
    #: embargo over); only such content may be kept when it is replaced.
    content_was_public: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=text("false")
    )

    owner: Mapped[User] = relationship()


def record_digest(record: Any, *extra: str) -> str:
    """A digest of every column of a record (an ORM object or a row with its columns) and of
    the row's `extra` columns: it changes whenever a value does, whoever changed it (the
    service, or an operator's SQL, which leaves `updated_at` as it was). What the ETag of
    anything showing a record is made of, so that a cache never keeps text the record no
    longer has (issue 36)."""
    names = [column.key for column in FileRecord.__table__.columns]
    values = "\0".join(repr(getattr(record, name)) for name in (*names, *extra))
    return hashlib.sha256(values.encode()).hexdigest()


class FileVersion(PublicFields, db.Model):
    """A content of a record other than its current one, with the public fields beside it.

    An ended version (`VersionState.ENDED`, numbered from 1) is one a replacement ended
    (app/files/versions.py): what its content was, when and by whom it was replaced, why
    (`change_note`), and the public fields as they were then; `stored_path` names its kept
    content (KEEP_RELEASED_VERSIONS), None when the content was deleted.

    The draft (`VersionState.DRAFT`, number `DRAFT_NUMBER`, at most one a record) is what a
    released record's editors want it to become while the change waits for approval
    (app/files/approval.py): the wanted public fields, and the wanted content, under its own
    key in `stored_path`, or None while the draft keeps the record's content.
    """

    __tablename__ = "file_versions"
    __table_args__ = (
        # Reconciliation and verification look kept objects up by key.
        Index("ix_file_versions_stored_path", "stored_path", unique=True),
    )

    record_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("file_records.id", ondelete="CASCADE"), primary_key=True
    )
    number: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    state: Mapped[str] = mapped_column(
        String(8), default=VersionState.ENDED, server_default=text("'ended'")
    )
    checksum_sha256: Mapped[str] = mapped_column(String(64))
    size: Mapped[int] = mapped_column(BigInteger)
    mime_type: Mapped[str] = mapped_column(String(255))
    original_name: Mapped[str] = mapped_column(String(255))
    #: Of an ended version: when and by whom; None on a draft.
    replaced_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    replaced_by: Mapped[int | None] = mapped_column(Integer)
    change_note: Mapped[str | None] = mapped_column(Text)
    stored_path: Mapped[str | None] = mapped_column(String(512))
    # The public fields (PublicFields, and `reihenfolge`), as the record had them when the
    # version ended, or as its draft wants them; None on versions ended before migration 0027.
    reihenfolge: Mapped[int | None] = mapped_column(Integer)

    @property
    def kept(self) -> bool:
        return self.stored_path is not None


#: The number of a record's draft (ended versions count from 1).
DRAFT_NUMBER = 0


class Series(db.Model):
    """A named, curated list of records ("IAB-Forschungsbericht"), made by an administrator
    (app/series); a record names its series and its number in it (`FileRecord.series_*`)."""

    __tablename__ = "series"

    slug: Mapped[str] = mapped_column(String(64), primary_key=True)
    title: Mapped[str] = mapped_column(String(255))
    description: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    created_by: Mapped[int | None] = mapped_column(Integer)


class RecordRelation(db.Model):
    """A link of a record to another record of this service, as its approved state says
    (`FileRecord.related_identifiers`, identifier type `record`): an index written by every
    write of the record (app/files/relations.py), so that the other record finds the links
    to it (and shows their inverse) without reading every record. Never the truth: the
    record's column is."""

    __tablename__ = "record_relations"
    __table_args__ = (Index("ix_record_relations_target", "target_id"),)

    record_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("file_records.id", ondelete="CASCADE"), primary_key=True
    )
    relation_type: Mapped[str] = mapped_column(String(32), primary_key=True)
    target_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)


class FilePathCount(db.Model):
    """How many records share one path and release state; kept by database triggers.

    Lists answer their exact ``total`` from these few rows instead of counting millions, and
    a path-prefix list reads each matching folder newest first from ``ix_file_records_path``.
    Records without a path are counted under ``""``, which no record path can be. The
    triggers (migration 0005) fire on every insert, delete, truncate and change of ``path``
    or ``freigabe``, whatever makes it, and drop a row whose count reaches zero (0012); a bulk
    load that disables triggers must recount (``bench/seed.py`` shows how).
    """

    __tablename__ = "file_path_counts"
    __table_args__ = (
        Index(
            "ix_file_path_counts_path",
            "path",
            postgresql_ops={"path": "text_pattern_ops"},
        ),
    )

    path: Mapped[str] = mapped_column(String(255), primary_key=True)
    freigabe: Mapped[bool] = mapped_column(Boolean, primary_key=True)
    n: Mapped[int] = mapped_column(BigInteger, default=0)


class UserFileCount(db.Model):
    """How many records one user owns; kept by database triggers (migration 0006).

    A user's own list takes its exact ``total`` from here instead of counting the rows.
    """

    __tablename__ = "user_file_counts"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    n: Mapped[int] = mapped_column(BigInteger, default=0)


class PendingObjectDeletion(db.Model):
    """An object to remove because no record points at it any more.

    Written in the same transaction as the row change that orphaned the object, and removed
    once the object is gone, so a deletion that fails (storage down) is retried, never lost.
    """

    __tablename__ = "pending_object_deletions"

    key: Mapped[str] = mapped_column(String(512), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)


class OaiTombstone(db.Model):
    """A released record that left the public view (deleted or unreleased), so that OAI-PMH
    harvesters learn of it (`<header status="deleted">`, persistent deletions).

    Written by the same flush as the change itself (app/oai/tombstones.py), removed again when
    the record is released once more.
    """

    __tablename__ = "oai_tombstones"
    __table_args__ = (Index("ix_oai_tombstones_deleted", "deleted_at", "record_id"),)

    record_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    path: Mapped[str | None] = mapped_column(String(255))
    #: The series it was in (migration 0029), so that its series' set still harvests it.
    series_slug: Mapped[str | None] = mapped_column(String(64))
    deleted_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ResumableUpload(db.Model):
    """An unfinished tus upload: how far it got and where its bytes wait in storage.

    Everything a later request needs lives here and in the storage backend, so an upload
    goes on after a restart and on any replica. ``storage_state`` is the backend's own
    bookkeeping (for S3: the multipart upload and its parts) as JSON.
    """

    __tablename__ = "resumable_uploads"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    record_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    stored_path: Mapped[str] = mapped_column(String(512))
    upload_metadata: Mapped[str] = mapped_column(Text, default="")
    length: Mapped[int] = mapped_column(BigInteger)
    offset: Mapped[int] = mapped_column(BigInteger, default=0)
    storage_state: Mapped[str] = mapped_column(Text, default="{}")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    completed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: The request writing a piece now, and until when its claim holds if its process dies
    #: (app/tus/services.py: one PATCH at a time per upload, on any replica).
    claim: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime)


class AuditEntry(db.Model):
    """One change, written in the transaction that made it (app/audit).

    Entries form hash chains: ``hash`` covers the entry's content and ``prev_hash``, the hash
    of the entry before it in its chain (``chain``, ``chain_seq``), so an entry edited,
    removed or inserted afterwards breaks its chain there (`flask audit verify`). ``seq``
    numbers all entries in the order they were written, across chains.
    """

    __tablename__ = "audit_entries"
    __table_args__ = (
        Index("ix_audit_entries_chain", "chain", "chain_seq", unique=True),
        Index("ix_audit_entries_record", "record_id", "seq"),
        Index("ix_audit_entries_actor", "actor", "seq"),
        Index("ix_audit_entries_action", "action", "seq"),
        Index("ix_audit_entries_at", "at"),
    )

    seq: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), Identity(), primary_key=True
    )
    chain: Mapped[int] = mapped_column(Integer)
    chain_seq: Mapped[int] = mapped_column(BigInteger)
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    actor_id: Mapped[int | None] = mapped_column(Integer)
    # The account's email at that moment, or `cli:<command>` for an operator command.
    actor: Mapped[str] = mapped_column(String(255))
    action: Mapped[str] = mapped_column(String(64))
    record_id: Mapped[uuid.UUID | None] = mapped_column(Uuid)
    account_id: Mapped[int | None] = mapped_column(Integer)
    changes: Mapped[str] = mapped_column(Text)
    request_id: Mapped[str | None] = mapped_column(String(64))
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))


class AuditChainHead(db.Model):
    """The last entry of one chain. A transaction writing entries locks one head that nobody
    else holds (`SKIP LOCKED`), so concurrent writers append to different chains instead of
    queueing behind one lock until each other's commit."""

    __tablename__ = "audit_chain_heads"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    last_seq: Mapped[int] = mapped_column(BigInteger)
    last_hash: Mapped[str] = mapped_column(String(64))


class ShareLink(db.Model):
    """A token-less link to one record or to a folder of records (a press kit), app/links.

    Only the SHA-256 of the secret is kept. A revoked link stays (``revoked_at``) so that its
    owner still sees it with its use counts; ``record_id`` has no foreign key for the same
    reason: a deleted record's links answer 404 and stay listed.
    """

    __tablename__ = "share_links"

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_by: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    record_id: Mapped[uuid.UUID | None] = mapped_column(Uuid, index=True)
    path: Mapped[str | None] = mapped_column(String(255), index=True)
    description: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    downloads: Mapped[int] = mapped_column(BigInteger, default=0)
    first_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class RecordCitation(db.Model):
    """A record's Cite box as citeproc-py rendered it when the record was written, in each
    page language, its address left as a placeholder (app/pages/citation.py); `key` tells
    whether it still fits the record and the style."""

    __tablename__ = "record_citations"

    record_id: Mapped[uuid.UUID] = mapped_column(
        Uuid, ForeignKey("file_records.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String(32))
    de: Mapped[str] = mapped_column(Text)
    en: Mapped[str] = mapped_column(Text)


class StatsDaily(db.Model):
    """Counted downloads of one record on one UTC day through one door, humans and machines
    apart (app/stats): the only statistics kept beyond the day, and nothing about anyone."""

    __tablename__ = "stats_daily"
    __table_args__ = (Index("ix_stats_daily_day", "day"),)

    record_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    door: Mapped[str] = mapped_column(String(16), primary_key=True)
    machine: Mapped[bool] = mapped_column(Boolean, primary_key=True)
    total: Mapped[int] = mapped_column(Integer)
    unique_visitors: Mapped[int] = mapped_column(Integer)


class StatsVisitor(db.Model):
    """A visitor (salted hash or account) already counted for a record today: what makes
    `unique` one per visitor per day across replicas; deleted at the day's roll-over."""

    __tablename__ = "stats_visitors"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    record_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    visitor: Mapped[str] = mapped_column(String(64), primary_key=True)


class StatsSalt(db.Model):
    """The day's salt of the visitor hashes, shared by all replicas; deleted at the
    roll-over, after which yesterday's hashes can no longer be linked to anyone."""

    __tablename__ = "stats_salts"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    salt: Mapped[bytes] = mapped_column(LargeBinary(32))


class ReleaseRequest(db.Model):
    """A request to release a record (`RequestKind.RELEASE`), or to put a released record's
    draft in place (`CHANGE`, `SPERRFRIST`), bound to the content (SHA-256) and the hash of
    the public fields it would make public (app/files/approval.py opens, supersedes, cancels,
    approves and declines them; app/releases serves them).

    ``record_id`` has no foreign key: a deleted record's requests stay (cancelled) for the
    report. At most one request per record is pending (``ix_release_requests_pending``);
    a pending change's draft is the record's (`FileVersion`, `DRAFT_NUMBER`).
    """

    __tablename__ = "release_requests"
    __table_args__ = (
        Index(
            "ix_release_requests_pending",
            "record_id",
            unique=True,
            postgresql_where=text("state = 'pending'"),
            sqlite_where=text("state = 'pending'"),
        ),
        Index("ix_release_requests_state", "state", "submitted_at"),
        Index("ix_release_requests_submitted", "submitted_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True, default=uuid.uuid4)
    record_id: Mapped[uuid.UUID] = mapped_column(Uuid, index=True)
    kind: Mapped[str] = mapped_column(String(16), default=RequestKind.RELEASE)
    #: Of a `sperrfrist` request: the embargo asked for (None: none).
    sperrfrist: Mapped[date | None] = mapped_column(Date)
    state: Mapped[str] = mapped_column(String(16), default=RequestState.PENDING)
    note: Mapped[str | None] = mapped_column(Text)
    content_sha256: Mapped[str] = mapped_column(String(64))
    public_hash: Mapped[str] = mapped_column(String(64))
    submitted_by: Mapped[int | None] = mapped_column(Integer)
    submitted_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    decided_by: Mapped[int | None] = mapped_column(Integer)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: Why it was declined, cancelled or approved by an administrator's override.
    reason: Mapped[str | None] = mapped_column(Text)
    override: Mapped[bool] = mapped_column(Boolean, default=False)
    #: Of a request cancelled by a change: what changed, {field: [old, new]} (JSON text).
    changes: Mapped[str | None] = mapped_column(Text)
    #: Of a change: the released record's SHA-256 and public fields' hash its draft starts
    #: from; the approval is refused if the record no longer holds them (a change made with
    #: the setting off).
    base_sha256: Mapped[str | None] = mapped_column(String(64))
    base_hash: Mapped[str | None] = mapped_column(String(64))


class ReleaseEditor(db.Model):
    """Someone who changed a record's content or public fields since its last approval: they
    may not approve it (four eyes). Cleared by each approval."""

    __tablename__ = "release_editors"

    record_id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    user_id: Mapped[int] = mapped_column(Integer, primary_key=True)


class MailOutbox(db.Model):
    """A mail to send, written in the transaction of what it tells about and sent after the
    commit (app/releases/mail.py), retried with backoff until it goes or runs out of tries."""

    __tablename__ = "mail_outbox"
    __table_args__ = (Index("ix_mail_outbox_due", "sent_at", "next_attempt_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    recipient: Mapped[str] = mapped_column(String(255))
    subject: Mapped[str] = mapped_column(String(255))
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Doi(db.Model):
    """A DOI reserved for a record, and what DataCite is to hold for it (app/doi, issue 40).

    The row is its own outbox: a write that changes what DataCite should hold sets ``due_at``
    in the record's transaction, and the worker (after the commit, or `flask doi work`) brings
    DataCite to ``wanted`` and clears it. ``record_id`` has no foreign key: a deleted record's
    DOI stays, hidden at DataCite, and its landing address answers a tombstone (410) from
    ``withdrawn_*`` and the citation kept at withdrawal.
    """

    __tablename__ = "dois"
    __table_args__ = (Index("ix_dois_due", "due_at"),)

    #: Lower case, prefix and suffix: "10.5072/abcd-1234".
    doi: Mapped[str] = mapped_column(String(255), primary_key=True)
    record_id: Mapped[uuid.UUID] = mapped_column(Uuid, unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    created_by: Mapped[int | None] = mapped_column(Integer)
    #: What DataCite holds as last confirmed: None (nothing yet), draft, registered, findable.
    state: Mapped[str | None] = mapped_column(String(16))
    #: What DataCite is to hold: draft, registered (hidden), findable, or deleted (a draft
    #: released before registration; the row goes once DataCite has deleted it).
    wanted: Mapped[str] = mapped_column(String(16), default="draft")
    #: SHA-256 of the metadata DataCite last accepted: an update is sent only when it differs.
    payload_hash: Mapped[str | None] = mapped_column(String(64))
    due_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    registered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    #: When and why the record left public view (unreleased, deleted), for the tombstone.
    withdrawn_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    withdrawn_reason: Mapped[str | None] = mapped_column(String(255))
    #: The record's title and citation (plain text) as they were at withdrawal.
    tombstone_title: Mapped[str | None] = mapped_column(String(255))
    tombstone_citation: Mapped[str | None] = mapped_column(Text)


class Cover(db.Model):
    """A record's picture in every size (app/covers, issue 50): derived from the bytes of its
    content, or of the content its draft waits with, or uploaded by its owner.

    The row is its own outbox: written (``due_at`` set) in the transaction of the write that
    makes it wanted, and made after the commit by the covers' worker, which stores the
    pictures under ``key`` and clears ``due_at``. A cover pictures exactly the bytes whose
    SHA-256 is ``source``, so one of a record's earlier (or waiting) bytes is never shown for
    its current ones. ``record_id`` has no foreign key: a record's deletion owes the deletion
    of its covers' objects and removes the rows itself.
    """

    __tablename__ = "covers"
    __table_args__ = (
        Index("ix_covers_source", "record_id", "origin", "source", unique=True),
        Index("ix_covers_due", "due_at"),
        # Reconciliation looks pictures and uploaded originals up by key.
        Index("ix_covers_key", "key"),
        Index("ix_covers_source_path", "source_path"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    record_id: Mapped[uuid.UUID] = mapped_column(Uuid)
    origin: Mapped[str] = mapped_column(String(16), default=CoverOrigin.CONTENT)
    #: The SHA-256 of the bytes pictured (the content's, or the owner's upload).
    source: Mapped[str] = mapped_column(String(64))
    #: Their key and type: the content's (or draft's) object, or the owner's upload.
    source_path: Mapped[str] = mapped_column(String(512))
    source_type: Mapped[str] = mapped_column(String(255))
    #: The pictures' common key prefix (`<key>-200.webp`, ...); None until made.
    key: Mapped[str | None] = mapped_column(String(512))
    #: The picture's proportions (what was cut from the source), for every size's height.
    width: Mapped[int | None] = mapped_column(Integer)
    height: Mapped[int | None] = mapped_column(Integer)
    #: JSON: {"200.webp": [size, sha256], ...} of the pictures stored.
    objects: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    made_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    due_at: Mapped[datetime | None] = mapped_column(UTCDateTime, default=utcnow)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    #: Why the last try made no picture (a hostile or unreadable file, storage down).
    last_error: Mapped[str | None] = mapped_column(Text)
