"""An audit entry's size is bounded (issue 36, finding 6): a text longer than the trail keeps
is recorded as its length and SHA-256, so a PATCH of every field at its longest leaves a few
kilobytes, and the chain still verifies."""

from __future__ import annotations

import hashlib

from flask import Flask

from app.audit.trail import MAX_VALUE_BYTES, canonical
from app.schemas.field_types import BESCHREIBUNG_MAX, STRING_MAX
from tests.audit.test_trail import entries
from tests.support.api import Account, Api

#: The bound docs/security.md states for one entry's `changes`.
ENTRY_BOUND = 8 * 1024
#: Four bytes in UTF-8: the longest text a field takes.
WIDE = "\U0001d11e"
TEXTS = ("aktiv_id", "reprotyp", "titel", "autoren", "sachschlagwoerter", "org_themen")


def _longest(mark: str) -> dict[str, str]:
    body = {name: mark + WIDE * (STRING_MAX - 1) for name in TEXTS}
    body["beschreibung"] = mark + WIDE * (BESCHREIBUNG_MAX - 1)
    return body


def test_a_patch_of_every_field_at_its_longest_leaves_a_bounded_entry(
    app: Flask, api: Api, alice: Account
) -> None:
    record = api.create(alice, **_longest("a"))
    new = _longest("b")
    response = api.patch(record["id"], alice, {**new, "reihenfolge": 7})
    assert response.status_code == 200, response.get_json()
    trail = [e for e in entries(app) if e["record_id"] == record["id"]]
    assert [e["action"] for e in trail] == ["file.create", "file.update"]
    created, update = (e["changes"] for e in trail)
    for changes in (created, update):
        assert len(canonical(changes).encode()) <= ENTRY_BOUND
    # Without the bound the update alone would have been this large:
    unbounded = {name: [_longest("a")[name], text] for name, text in new.items()}
    assert len(canonical(unbounded).encode()) > 50_000
    text = new["beschreibung"]
    assert update["beschreibung"][1] == {
        "length": BESCHREIBUNG_MAX,
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }
    assert created["titel"]["length"] == STRING_MAX
    # Short values stay as they were.
    assert update["reihenfolge"][1] == 7
    short = "Kurzer Titel"
    assert api.patch(record["id"], alice, {"titel": short}).status_code == 200
    last = [e for e in entries(app) if e["record_id"] == record["id"]][-1]
    assert last["changes"]["titel"] == [
        {"length": STRING_MAX, "sha256": hashlib.sha256(new["titel"].encode()).hexdigest()},
        short,
    ]
    result = app.test_cli_runner().invoke(args=["audit", "verify"])
    assert result.exit_code == 0, result.output


def test_a_value_at_the_bound_is_kept_as_it_is(app: Flask, api: Api, alice: Account) -> None:
    record = api.create(alice)
    at_bound = "x" * (MAX_VALUE_BYTES - 2)  # its JSON text has the two quotes
    over = "x" * (MAX_VALUE_BYTES - 1)
    assert api.patch(record["id"], alice, {"beschreibung": at_bound}).status_code == 200
    assert api.patch(record["id"], alice, {"beschreibung": over}).status_code == 200
    first, second = [e["changes"] for e in entries(app) if e["action"] == "file.update"]
    assert first["beschreibung"][1] == at_bound
    assert second["beschreibung"] == [
        at_bound,
        {"length": len(over), "sha256": hashlib.sha256(over.encode()).hexdigest()},
    ]
