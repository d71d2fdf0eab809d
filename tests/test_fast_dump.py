"""Lists serialise records with FastDump; it must write exactly what the marshmallow schema
writes (the schema is the documented contract), field order included."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta, timezone

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st
from marshmallow import Schema, fields

from app.models import FileRecord
from app.schemas.fast_dump import FastDump
from app.schemas.field_types import format_timestamp
from app.schemas.records import (
    FileRecordSchema,
    created_record_schema,
    public_record_schema,
    record_schema,
)

texts = st.none() | st.text(max_size=40)
instants = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
) | st.datetimes(
    min_value=datetime(1970, 1, 2),
    max_value=datetime(2200, 1, 1),
    timezones=st.just(timezone(timedelta(hours=5, minutes=30))),
)

records = st.builds(
    FileRecord,
    id=st.uuids(version=4),
    user_id=st.integers(1, 10),
    stored_path=st.just("files/x/y"),
    checksum_sha256=st.just("0" * 64),
    original_name=st.text(min_size=1, max_size=40),
    mime_type=st.sampled_from(["application/pdf", "text/plain", "video/mp4"]),
    size=st.integers(0, 2**40),
    aktiv_id=texts,
    path=texts,
    reprotyp=texts,
    titel=texts,
    beschreibung=texts,
    autoren=texts,
    sachschlagwoerter=texts,
    org_themen=texts,
    sperrfrist=st.none() | st.dates(min_value=date(1, 1, 1), max_value=date(9999, 12, 31)),
    reihenfolge=st.integers(-(2**31), 2**31 - 1),
    freigabe=st.booleans(),
    erstellt_von=texts,
    freigegeben_von=texts,
    created_at=instants,
    updated_at=instants,
    version=st.integers(1, 2**31 - 1),
    content_was_public=st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(batch=st.lists(records, max_size=5))
def test_fast_dump_writes_what_the_schema_writes(batch: list[FileRecord]):
    for schema in (record_schema, public_record_schema, created_record_schema):
        expected = schema.dump(batch, many=True)
        written = FastDump(schema).dump(batch, many=True)
        assert [list(row.items()) for row in written] == [list(row.items()) for row in expected]


@pytest.fixture(scope="module")
def engine():
    engine = sa.create_engine("sqlite://")
    FileRecord.__table__.create(engine)
    yield engine
    engine.dispose()


@settings(max_examples=50, deadline=None)
@given(batch=st.lists(records, min_size=1, max_size=5, unique_by=lambda r: r.id))
def test_rows_read_by_position_give_the_same_dump(engine, batch: list[FileRecord]):
    """Lists hand FastDump result rows, not objects: the columns by position, any order."""
    table = FileRecord.__table__
    values = [
        {**{c.name: getattr(r, c.name) for c in table.columns}, "stored_path": f"files/{r.id}"}
        for r in batch
    ]
    with engine.begin() as conn:
        conn.execute(table.delete())
        conn.execute(table.insert(), values)
        columns = list(reversed(table.columns))
        rows = conn.execute(sa.select(*columns).order_by(table.c.created_at, table.c.id)).all()
    batch.sort(key=lambda r: (r.created_at.astimezone(UTC), str(r.id)))
    for schema in (record_schema, public_record_schema):
        written = FastDump(schema).dump(rows, many=True)
        expected = schema.dump(batch, many=True)
        assert [list(row.items()) for row in written] == [list(row.items()) for row in expected]


def test_one_record_and_the_field_sets():
    record = FileRecord(
        id=uuid.UUID("6f1c9f0e-6a57-4f7e-9a43-2d0e1b7c3a11"),
        original_name="bericht.pdf",
        mime_type="application/pdf",
        size=12,
        freigabe=True,
        reihenfolge=0,
        sperrfrist=date(2026, 2, 28),
        created_at=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
        updated_at=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
    )
    row = FastDump(public_record_schema).dump(record)
    assert row == public_record_schema.dump(record)
    assert row["created_at"] == "2026-01-02T03:04:05.000006Z"
    assert row["sperrfrist"] == "2026-02-28"
    assert "erstellt_von" not in row and list(row) == list(public_record_schema.dump_fields)
    assert list(FastDump(record_schema).dump(record)) == list(FileRecordSchema().dump_fields)


@settings(max_examples=300, deadline=None)
@given(
    instant=st.datetimes(
        min_value=datetime(1000, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from(
            [UTC, timezone(timedelta(hours=-7)), timezone(timedelta(hours=14))]
        ),
    )
)
def test_timestamps_are_written_as_the_original_service_wrote_them(instant: datetime):
    """The API's one timestamp format (schemas, lists, audit trail, share links): what the
    strftime pattern of the original service writes."""
    written = format_timestamp(instant)
    assert written == instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert len(written) == 27 and written.endswith("Z")


def test_a_field_it_cannot_write_is_refused_when_built():
    class WithList(Schema):
        tags = fields.List(fields.String())

    class Renamed(Schema):
        name = fields.String(data_key="title")

    with pytest.raises(TypeError, match="tags"):
        FastDump(WithList())
    with pytest.raises(TypeError, match="renamed"):
        FastDump(Renamed())
