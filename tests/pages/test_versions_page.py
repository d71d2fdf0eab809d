"""Readers see a new version (issue 39): the landing page, JSON-LD, DataCite, the citation,
the OAI-PMH datestamp and the Atom entry follow it."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import feedparser
from lxml import html

from tests.support.api import Account, Api, parse_timestamp

V1 = b"Jahr;Quote\n2025;5,9\n"
V2 = b"Jahr;Quote\n2025;6,0\n"
V3 = b"Jahr;Quote\n2025;6,0\n2026;6,1\n"


def replaced_twice(api: Api, alice: Account) -> tuple[str, dict]:
    api.app.config["KEEP_RELEASED_VERSIONS"] = "on"
    rid = api.create(alice, "quote.csv", V1, titel="Quote", autoren="Muster, Anna")["id"]
    api.replace(alice, rid, "quote.csv", V2, change_note="2025 korrigiert")
    third = api.replace(alice, rid, "quote.csv", V3)
    assert third.status_code == 200
    return rid, third.get_json()


def test_the_landing_page_shows_the_version_and_the_kept_versions(api: Api, alice: Account):
    rid, record = replaced_twice(api, alice)
    changed = parse_timestamp(record["updated_at"]).date()
    for language, changed_word, earlier in (
        ("de", "geändert am", "Frühere Versionen"),
        ("en", "changed on", "Earlier versions"),
    ):
        page = api.client.get(f"/records/{rid}?lang={language}")
        assert page.status_code == 200
        tree = html.fromstring(page.get_data())
        (version,) = tree.xpath("//dd[@class='version']")
        assert version.text_content().startswith("3 (" + changed_word)
        assert version.xpath(".//time/@datetime")[0] == changed.isoformat()
        (section,) = tree.xpath("//section[@class='versions']")
        assert section.xpath("string(.//h2)") == earlier
        items = [item.text_content() for item in section.xpath(".//li")]
        assert len(items) == 2
        assert items[0].startswith("Version 2") and items[1].startswith("Version 1")
        assert "2025 korrigiert" in items[1] and "2025 korrigiert" not in items[0]
        assert api.row(rid).checksum_sha256 not in " ".join(items)
        links = section.xpath(".//a/@href")
        assert links == [
            f"http://localhost/api/public/files/{rid}/versions/2/download",
            f"http://localhost/api/public/files/{rid}/versions/1/download",
        ]
        assert api.client.get(links[1].removeprefix("http://localhost")).data == V1

        (script,) = tree.xpath("//script[@type='application/ld+json']")
        data = json.loads(script.text)
        assert data["version"] == 3 and data["dateModified"] == changed.isoformat()
        (cite,) = tree.xpath("//p[@class='citation']")
        assert "Version 3." in cite.text_content()


def test_a_first_version_is_cited_as_before(api: Api, alice: Account):
    rid = api.create(alice, "quote.csv", V1, titel="Quote")["id"]
    tree = html.fromstring(api.client.get(f"/records/{rid}").get_data())
    assert "Version" not in tree.xpath("string(//p[@class='citation'])")
    assert tree.xpath("string(//dd[@class='version'])") == "1"
    assert tree.xpath("//section[@class='versions']") == []


def test_exports_harvesting_and_feeds_follow_the_new_version(api: Api, alice: Account):
    rid, record = replaced_twice(api, alice)
    datacite = api.client.get(f"/records/{rid}/export/datacite").get_data(as_text=True)
    assert "<version>3</version>" in datacite
    assert 'dateType="Updated"' in datacite
    csl = json.loads(api.client.get(f"/records/{rid}/export/csl-json").get_data())
    assert csl[0]["version"] == "3"

    updated = parse_timestamp(record["updated_at"])
    oai = api.client.get(
        "/oai",
        query_string={
            "verb": "GetRecord",
            "metadataPrefix": "oai_dc",
            "identifier": f"oai:{api.app.config['OAI_NAMESPACE']}:{rid}",
        },
    ).get_data(as_text=True)
    (datestamp,) = re.findall(r"<datestamp>([^<]+)</datestamp>", oai)
    assert datestamp == updated.strftime("%Y-%m-%dT%H:%M:%SZ")

    feed = feedparser.parse(api.client.get("/api/public/feed.atom").data)
    (entry,) = [e for e in feed.entries if e.id.endswith(rid)]
    entry_updated = datetime(*entry.updated_parsed[:6], tzinfo=UTC)
    assert entry_updated == updated.replace(microsecond=0)
