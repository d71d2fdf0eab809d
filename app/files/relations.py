"""Links between records and a record's series (issue 49): what a write may name, the index
of links between records, and the links a reader may see.

A record states its links in `related_identifiers` (app/schemas/attribution.py); a link to
another record of this service names it by id. The record that is linked to shows the inverse
("IsSupplementedBy" for an "IsSupplementTo"), found through `record_relations`, an index every
write rewrites from the record's approved state. A link never reveals a record its reader may
not see: a link to (or from) a record that is unreleased, deleted or unknown to the reader is
left out, never shown as a dead end. Who may see what is `access.visible`'s to say.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, insert, inspect, or_, select

from app.auth.services import Caller
from app.exceptions import ValidationFailed
from app.extensions import db
from app.files import access
from app.files.access import LinkHolder
from app.models import FileRecord, RecordRelation, Series
from app.schemas.attribution import INVERSE, parsed

RECORD = "record"


def record_links(text: str | None) -> list[tuple[int, str, uuid.UUID]]:
    """(position, relation type, record id) of each link to a record in stored links."""
    return [
        (index, link["relation_type"], uuid.UUID(link["identifier"]))
        for index, link in enumerate(parsed(text) or [])
        if link["identifier_type"] == RECORD
    ]


def check_references(
    values: Mapping[str, Any],
    writer: Caller | None,
    current: Any = None,
    record_id: uuid.UUID | None = None,
) -> None:
    """422 for what a write names that does not exist for its writer: a series no
    administrator made, or a link to a record the writer may not see (nor the public), or to
    the record itself. Links the record (`current`: it, or its draft) has already are not
    checked again, so that a client sending its whole form back keeps a link whose record
    was unreleased since; `record_id` is the record written (None: a new one)."""
    errors: dict[str, list[str]] = {}
    slug = values.get("series_slug")
    if slug is not None and db.session.get(Series, slug) is None:
        errors["series.slug"] = [
            f"There is no series {slug}; an administrator makes series (POST /api/series)."
        ]
    had = {
        (kind, target)
        for _, kind, target in record_links(getattr(current, "related_identifiers", None))
    }
    new = [
        (index, target)
        for index, kind, target in record_links(values.get("related_identifiers"))
        if (kind, target) not in had
    ]
    if new:
        seen = visible_ids([target for _, target in new], writer, also_public=True)
        for index, target in new:
            key = f"related_identifiers.{index}.identifier"
            if target == record_id:
                errors[key] = ["A record cannot be linked to itself."]
            elif target not in seen:
                errors[key] = ["There is no record with this id that you may see."]
    if errors:
        raise ValidationFailed(errors)


def visible_ids(
    ids: Iterable[uuid.UUID], reader: Caller | LinkHolder | None, *, also_public: bool = False
) -> set[uuid.UUID]:
    """Which of these records `reader` may see (None: the public; `also_public`: or the
    public may)."""
    wanted = set(ids)
    if not wanted:
        return set()
    seen = access.visible(reader)
    if also_public and reader is not None:
        seen = or_(seen, access.visible(None))
    return set(db.session.scalars(select(FileRecord.id).where(FileRecord.id.in_(wanted), seen)))


def index(record: FileRecord, *, deleted: bool = False) -> set[uuid.UUID]:
    """Bring the record's rows of `record_relations` in line with its links (its approved
    state: the record's own column), whatever wrote them; a deleted record's go with it.
    Returns the records whose shown links the write may change: those it linked to before
    or links to now, and those linking to it. Reads and writes only the index (no flush of
    the write's other rows), but for a new record's first links, which need its row."""
    wanted = set()
    if not deleted:
        wanted = {(kind, target) for _, kind, target in record_links(record.related_identifiers)}
    with db.session.no_autoflush:
        had = {
            (kind, target)
            for kind, target in db.session.execute(
                select(RecordRelation.relation_type, RecordRelation.target_id).where(
                    RecordRelation.record_id == record.id
                )
            )
        }
        if had != wanted:
            db.session.execute(delete(RecordRelation).where(RecordRelation.record_id == record.id))
        touched = set(
            db.session.scalars(
                select(RecordRelation.record_id).where(RecordRelation.target_id == record.id)
            )
        )
    if wanted and had != wanted:
        if inspect(record).pending:
            db.session.flush()  # the record's row first: the index points at it
        rows = [
            {"record_id": record.id, "relation_type": kind, "target_id": target}
            for kind, target in sorted(wanted, key=str)
        ]
        with db.session.no_autoflush:
            db.session.execute(insert(RecordRelation), rows)
    touched |= {target for _, target in had | wanted}
    touched.discard(record.id)
    return touched


@dataclass(frozen=True)
class Link:
    """A link as a reader sees it: DataCite's relation type from the record's side, the
    identifier (a DOI, a URL, or for a record its id), and for a record its row;
    `inverse` when the other record states it."""

    relation_type: str
    identifier_type: str
    identifier: str
    target: Any = None
    inverse: bool = False


def links_of(record: Any, reader: Caller | None = None) -> list[Link]:
    """The record's links as `reader` may see them (None: the public): its own, in their
    order, but those to records the reader may not see; then the inverse of each link to it
    from a record the reader may see (newest first), unless the record states it too."""
    return links_for([record], reader)[record.id]


def links_for(records: list[Any], reader: Caller | None = None) -> dict[uuid.UUID, list[Link]]:
    """`links_of` of each of `records`, by id, in two queries for all of them (a page of an
    OAI-PMH harvest)."""
    own = {record.id: parsed(record.related_identifiers) or [] for record in records}
    targets = {
        uuid.UUID(link["identifier"])
        for links in own.values()
        for link in links
        if link["identifier_type"] == RECORD
    }
    rows = {}
    if targets:
        query = select(*FileRecord.__table__.columns).where(
            FileRecord.id.in_(targets), access.visible(reader)
        )
        rows = {row.id: row for row in db.session.execute(query)}
    incoming: dict[uuid.UUID, list[Any]] = {record_id: [] for record_id in own}
    if own:
        for row in db.session.execute(
            select(
                RecordRelation.target_id,
                RecordRelation.relation_type,
                *FileRecord.__table__.columns,
            )
            .join(FileRecord, FileRecord.id == RecordRelation.record_id)
            .where(RecordRelation.target_id.in_(list(own)), access.visible(reader))
            .order_by(FileRecord.created_at.desc(), FileRecord.id.desc())
        ):
            incoming[row.target_id].append(row)
    found: dict[uuid.UUID, list[Link]] = {}
    for record_id, links in own.items():
        shown: list[Link] = []
        for link in links:
            if link["identifier_type"] != RECORD:
                shown.append(
                    Link(link["relation_type"], link["identifier_type"], link["identifier"])
                )
            elif (row := rows.get(uuid.UUID(link["identifier"]))) is not None:
                shown.append(Link(link["relation_type"], RECORD, link["identifier"], row))
        stated = {(link.relation_type, link.identifier) for link in shown}
        for row in incoming[record_id]:
            relation = INVERSE[row.relation_type]
            if (relation, str(row.id)) not in stated and row.id != record_id:
                stated.add((relation, str(row.id)))
                shown.append(Link(relation, RECORD, str(row.id), row, inverse=True))
        found[record_id] = shown
    return found


def visible_links(answers: list[dict[str, Any]], reader: Caller | LinkHolder | None) -> None:
    """Record answers (`related_identifiers` as stored) without the links to records `reader`
    may not see (None: the public; a share link's holder sees what the public sees besides
    what the link names), in one query for all of them."""
    ids = {
        uuid.UUID(link["identifier"])
        for answer in answers
        for link in answer.get("related_identifiers") or []
        if link["identifier_type"] == RECORD
    }
    seen = {str(found) for found in visible_ids(ids, reader, also_public=reader is not None)}
    for answer in answers:
        if answer.get("related_identifiers"):
            answer["related_identifiers"] = [
                link
                for link in answer["related_identifiers"]
                if link["identifier_type"] != RECORD or link["identifier"] in seen
            ]


class SeenLinks:
    """A record dump (app/schemas/fast_dump.py) for readers other than the records' owners
    and administrators: its answers leave out the links `reader` may not follow."""

    def __init__(self, dump: Any, reader: Caller | LinkHolder | None) -> None:
        self.inner, self.reader = dump, reader

    def dump(self, obj: Any, *, many: bool = False) -> Any:
        answers = self.inner.dump(obj, many=many)
        visible_links(answers if many else [answers], self.reader)
        return answers
