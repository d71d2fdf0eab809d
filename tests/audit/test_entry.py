"""An entry's fields are one table (app/audit/schemas.py, `ENTRY_FIELDS`), and the hash an
entry was written with stays the hash it is checked with (issue 34 item 3)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

from app.audit.schemas import ENTRY_FIELDS, AuditEntrySchema
from app.audit.trail import HASHED, entry_hash
from app.models import AuditEntry


def test_the_table_the_schema_and_the_hash_have_the_entry_fields() -> None:
    assert [column.key for column in AuditEntry.__table__.columns] == list(ENTRY_FIELDS)
    assert list(AuditEntrySchema().fields) == list(ENTRY_FIELDS)
    assert HASHED == tuple(ENTRY_FIELDS)[1:-1]


def test_an_entry_keeps_the_hash_it_was_written_with() -> None:
    """Hashes computed by the code that wrote the trails of earlier releases: a trail written
    then still verifies (`flask audit verify`)."""
    entry = {
        "seq": 7,
        "chain": 2,
        "chain_seq": 5,
        "at": datetime(2026, 11, 3, 4, 5, 6, 789012, tzinfo=UTC),
        "actor_id": 3,
        "actor": "ä@example.org",
        "action": "file.update",
        "record_id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "account_id": None,
        "changes": '{"titel":["Ä","B"]}',
        "request_id": "abc",
        "prev_hash": "f" * 64,
        "hash": "not covered",
    }
    expected = "5fa9c14250f46bfaa4913dacffab30fc2d4fd6014e4f55434f11ae456e7f505d"
    assert entry_hash(entry) == expected
    # The same instant with another offset is the same entry.
    local = datetime(2026, 11, 3, 6, 5, 6, 789012, tzinfo=timezone(timedelta(hours=2)))
    assert entry_hash({**entry, "at": local}) == expected
    first = {
        "chain": 0,
        "chain_seq": 1,
        "at": datetime(2026, 1, 1, tzinfo=UTC),
        "actor_id": None,
        "actor": "cli:create-user",
        "action": "account.create",
        "record_id": None,
        "account_id": 1,
        "changes": "{}",
        "request_id": None,
        "prev_hash": "0" * 64,
    }
    assert entry_hash(first) == "88985bb6bc580c4353d34aae88af73c1c0942719012e1f887ccc93f6fa0a4f9e"
