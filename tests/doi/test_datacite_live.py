"""The DataCite client and payload against DataCite's real test API (api.test.datacite.org):
opt-in, never in CI. `pyproject.toml` deselects the `datacite_live` marker; tests/README.md
says how to run it with a test account's credentials from the environment.

It creates a draft under the test prefix, updates it, reads it back and deletes it: a draft
leaves nothing behind. Registering is not tried, as a registered test DOI stays for good.
"""

from __future__ import annotations

import os
import secrets
import uuid
from datetime import UTC, datetime

import pytest

from app.doi import payload
from app.doi.client import DataCite, DataCiteRejected
from app.models import FileRecord

pytestmark = pytest.mark.datacite_live

TEST_API = "https://api.test.datacite.org"
SETTINGS = ("DATACITE_TEST_REPOSITORY", "DATACITE_TEST_PASSWORD", "DATACITE_TEST_PREFIX")


@pytest.fixture
def live() -> tuple[DataCite, str]:
    missing = [name for name in SETTINGS if not os.environ.get(name)]
    if missing:
        pytest.fail(f"set {', '.join(missing)} to run the DataCite live test (tests/README.md)")
    client = DataCite(
        os.environ.get("DATACITE_TEST_URL", TEST_API),
        os.environ["DATACITE_TEST_REPOSITORY"],
        os.environ["DATACITE_TEST_PASSWORD"],
        timeout=30,
    )
    return client, os.environ["DATACITE_TEST_PREFIX"]


def test_a_draft_at_datacites_test_api_round_trips(live):
    client, prefix = live
    doi = f"{prefix}/file-repository-test-{secrets.token_hex(4)}"
    record = FileRecord(
        id=uuid.uuid4(),
        original_name="messreihe.csv",
        mime_type="text/csv",
        size=42,
        created_at=datetime.now(UTC),
        version=1,
        titel="Testeintrag des Dateirepositoriums – bitte ignorieren",
        autoren="Müller, Anna; Institut für Beispiele",
        sachschlagwoerter="Test, Ümlaut",
        beschreibung="Ein Entwurf, den der Test wieder löscht.",
    )
    attributes = payload.attributes(
        record,
        doi,
        landing_url=f"https://example.org/records/{record.id}",
        publisher="File repository test",
        available=None,
    )
    payload.validate(attributes)
    try:
        created = client.create_draft(doi, attributes)
        assert created["state"] == "draft"
        assert created["doi"] == doi.lower()
        attributes["titles"] = [{"title": "Geänderter Titel – bitte ignorieren"}]
        client.update(doi, attributes, None)
        held = client.get(doi)
        assert held is not None and held["state"] == "draft"
        assert held["titles"][0]["title"] == "Geänderter Titel – bitte ignorieren"
        assert [c["name"] for c in held["creators"]] == ["Müller, Anna", "Institut für Beispiele"]
        with pytest.raises(DataCiteRejected) as refused:
            client.create_draft(f"10.5555/not-ours-{secrets.token_hex(4)}", attributes)
        assert 400 <= refused.value.status < 500
    finally:
        client.delete(doi)
    assert client.get(doi) is None
