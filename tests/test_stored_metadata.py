"""No stored metadata can break an output (issue 21): every text field is written through the
API with any Unicode, and every XML and JSON answer that shows it stays well-formed and 200.

Add each new output that shows record metadata to `OUTPUTS`.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bibtexparser
import citeproc
import html5lib
import pytest
import rispy
from citeproc import Citation, CitationItem, CitationStylesBibliography, CitationStylesStyle
from citeproc.source.json import CiteProcJSON
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from tests.links.test_links import TOMORROW
from tests.support import samples
from tests.support.api import Account, Api

TEXT_FIELDS = [
    "titel",
    "beschreibung",
    "autoren",
    "sachschlagwoerter",
    "org_themen",
    "aktiv_id",
    "reprotyp",
    "erstellt_von",
    "freigegeben_von",
    "path",
]
# Any code point, the troublesome ones often: controls, surrogates, noncharacters, XML's
# specials, the separators the outputs split on, and text that strips to nothing.
TROUBLE = "\x00\x01\x08\t\n\x0b\r\x1b\x7f\x85\ud800\udfff\ufdd0\ufffe\uffff\U0001fffe<>&\"';,/ "
# Text made only of what XML 1.0 cannot carry once broke every feed that showed it.
NOT_XML = "\x01\x08\x0b\x0c\x1b\x1f\ufffe\uffff"
texts = (
    st.text(alphabet=st.sampled_from(NOT_XML), min_size=1, max_size=3)
    | st.text(alphabet=st.sampled_from(TROUBLE), max_size=6)
    | st.text(alphabet=st.characters(codec=None) | st.sampled_from(TROUBLE), max_size=40)
)
names = st.text(
    alphabet=st.characters(exclude_categories=["Cs", "Cc"], exclude_characters="/\\"),
    min_size=1,
    max_size=30,
)


def xml(response: Any) -> None:
    etree.fromstring(response.data)


def json_body(response: Any) -> None:
    json.loads(response.data)


def zip_manifest(response: Any) -> None:
    with zipfile.ZipFile(io.BytesIO(response.data)) as archive:
        json.loads(archive.read("manifest.json"))


def html_page(response: Any) -> None:
    """Parsed without a single HTML parse error, and its JSON-LD is the one script, as JSON."""
    document = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parse(response.data)
    (script,) = document.iter("script")
    assert script.get("type") == "application/ld+json"
    json.loads(script.text)


def html_without_script(response: Any) -> None:
    """A page with no JSON-LD: parsed without a single HTML parse error, and no script."""
    document = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parse(response.data)
    assert not list(document.iter("script"))


def holder_page(api: Api, user: Account, record: dict) -> Any:
    """The holder's page of a fresh share link to the record."""
    created = api.client.post(
        f"/api/files/{record['id']}/links", json={"expires_at": TOMORROW}, headers=user.auth
    )
    assert created.status_code == 201, created.get_json()
    return api.client.get(created.get_json()["url"])


def bibtex(response: Any) -> None:
    library = bibtexparser.parse_string(response.get_data(as_text=True))
    assert not library.failed_blocks and len(library.entries) == 1


def ris(response: Any) -> None:
    text = response.get_data(as_text=True)
    assert text.startswith("TY  - ")
    assert len(rispy.loads(text)) == 1


def csl_json(response: Any) -> None:
    """Read by citeproc-py as a CSL-JSON source, and rendered."""
    items = json.loads(response.data)
    style = CitationStylesStyle(
        str(Path(citeproc.STYLES_PATH) / "harvard-cite-them-right.csl"), validate=False
    )
    bibliography = CitationStylesBibliography(style, CiteProcJSON(items), citeproc.formatter.plain)
    bibliography.register(Citation([CitationItem(items[0]["id"])]))
    assert str(bibliography.bibliography()[0])


def _export_of(name: str) -> Callable[[Api, Account, dict], Any]:
    return lambda api, user, r: api.client.get(f"/records/{r['id']}/export/{name}")


def oai_identifier(record: dict) -> str:
    return f"oai:file-repository.local:{record['id']}"


#: (what it is, how to ask for it, how to check it is well-formed)
OUTPUTS: list[tuple[str, Callable[[Api, Account, dict], Any], Callable[[Any], None]]] = [
    ("atom", lambda api, user, r: api.client.get("/api/public/feed.atom"), xml),
    ("podcast", lambda api, user, r: api.client.get("/api/public/podcast.rss"), xml),
    (
        "oai GetRecord",
        lambda api, user, r: api.client.get(
            "/oai",
            query_string={
                "verb": "GetRecord",
                "metadataPrefix": "oai_dc",
                "identifier": oai_identifier(r),
            },
        ),
        xml,
    ),
    (
        "oai ListRecords",
        lambda api, user, r: api.client.get(
            "/oai", query_string={"verb": "ListRecords", "metadataPrefix": "oai_dc"}
        ),
        xml,
    ),
    ("oai ListSets", lambda api, user, r: api.client.get("/oai?verb=ListSets"), xml),
    ("read", lambda api, user, r: api.get(f"/api/files/{r['id']}", user), json_body),
    ("list", lambda api, user, r: api.get("/api/files", user), json_body),
    ("public read", lambda api, user, r: api.client.get(f"/api/public/files/{r['id']}"), json_body),
    ("public list", lambda api, user, r: api.client.get("/api/public/files"), json_body),
    ("record page", lambda api, user, r: api.client.get(f"/records/{r['id']}"), html_page),
    (
        "record page en",
        lambda api, user, r: api.client.get(f"/records/{r['id']}?lang=en"),
        html_page,
    ),
    (
        "folder page",
        lambda api, user, r: api.client.get(f"/browse/{r['folder']}"),
        html_without_script,
    ),
    ("root folder page", lambda api, user, r: api.client.get("/browse/"), html_without_script),
    ("front page", lambda api, user, r: api.client.get("/"), html_without_script),
    ("front page en", lambda api, user, r: api.client.get("/?lang=en"), html_without_script),
    ("holder page", holder_page, html_without_script),
    ("sitemap", lambda api, user, r: api.client.get("/sitemap.xml"), xml),
    *(
        (f"record export {name}", _export_of(name), check)
        for name, check in (
            ("bibtex", bibtex),
            ("ris", ris),
            ("csl-json", csl_json),
            ("datacite", xml),
            ("dc", xml),
        )
    ),
    (
        "folder zip",
        lambda api, user, r: api.get("/api/files.zip", user, query_string={"path": r["path"]}),
        zip_manifest,
    ),
    (
        "public folder zip",
        lambda api, user, r: api.client.get(
            "/api/public/files.zip", query_string={"path": r["path"]}
        ),
        zip_manifest,
    ),
]


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(values=st.fixed_dictionaries({name: texts for name in TEXT_FIELDS}), name=names)
def test_no_accepted_text_breaks_an_output(
    api: Api, alice: Account, values: dict[str, str], name: str
):
    upload = api.upload(alice, [(f"{name}.mp3", samples.mp3_bytes())], path="folder")
    assert upload.status_code == 201, upload.get_json()
    (record,) = upload.get_json()["files"]
    try:
        before = api.get(f"/api/files/{record['id']}", alice).get_json()
        response = api.patch(record["id"], alice, values)
        assert response.status_code in (200, 422)
        if response.status_code == 422:  # nothing changed; the other fields are accepted
            refused = set(response.get_json()["errors"])
            assert refused <= set(values)
            assert api.get(f"/api/files/{record['id']}", alice).get_json() == before
            values = {k: v for k, v in values.items() if k not in refused}
            if values:
                assert api.patch(record["id"], alice, values).status_code == 200
        record = api.get(f"/api/files/{record['id']}", alice).get_json()
        for field, value in values.items():
            assert record[field] == (value.strip() or None), field
        record["folder"] = record["path"] or ""  # the root folder's page is /browse/
        record["path"] = record["path"] or "folder"
        for label, ask, well_formed in OUTPUTS:
            response = ask(api, alice, record)
            assert response.status_code == 200, (label, record["folder"], response.data[-300:])
            well_formed(response)
    finally:
        assert api.delete(record["id"], alice).status_code == 204


def test_the_troublesome_values_are_refused_or_kept(api: Api, alice: Account):
    """The examples above reach both answers: these are refused, these kept as sent."""
    record = api.create(alice, "a.mp3", samples.mp3_bytes())
    for value in ("\x00", "\x01", "\x0b", "\ud800", "\ufdd0", "\ufffe", "\U0001fffe"):
        assert api.patch(record["id"], alice, {"titel": value}).status_code == 422, value
    for value in ("<&>\"'", "a\tb\nc\rd", "\x7f\x85x", "\U0001f600", "\u2028x"):
        assert api.patch(record["id"], alice, {"titel": value}).status_code == 200, value
        assert api.get(f"/api/files/{record['id']}", alice).get_json()["titel"] == value.strip()


@pytest.mark.parametrize("label", [label for label, _, _ in OUTPUTS])
def test_every_output_is_listed_once(label: str):
    assert [entry[0] for entry in OUTPUTS].count(label) == 1
