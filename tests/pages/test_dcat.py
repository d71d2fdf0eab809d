"""A data set's DCAT-AP description (issue 49, point 5): `GET /records/{id}` with
`Accept: text/turtle` or `application/rdf+xml`, read back with rdflib and checked against
DCAT-AP 3.0.0's SHACL shapes (tests/pages/dcat-ap-3.0.0/): no violation, and no warning but
those of what the service does not know (a licence, spatial and temporal coverage, a theme
of the EU vocabulary, the distribution's availability)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyshacl import validate
from rdflib import Graph, Literal, Namespace, URIRef
from rdflib.namespace import DCAT, DCTERMS, FOAF, RDF, SH

from tests.files.test_creators import ERIKA, INSTITUTE, ORCID
from tests.files.test_related_identifiers import CSV, link
from tests.support import samples
from tests.support.api import Account, Api

SHAPES = Path(__file__).with_name("dcat-ap-3.0.0")
SPDX = Namespace("http://spdx.org/rdf/terms#")
BASE = "http://localhost"
#: What DCAT-AP recommends and the service cannot say.
UNKNOWN = {
    (DCAT.Dataset, DCTERMS.spatial),
    (DCAT.Dataset, DCTERMS.temporal),
    (DCAT.Dataset, DCAT.theme),
    (DCAT.Distribution, DCTERMS.license),
    (DCAT.Distribution, URIRef("http://data.europa.eu/r5r/availability")),
    (FOAF.Agent, DCTERMS.type),
}


def shapes() -> Graph:
    found = Graph()
    for name in ("shapes.ttl", "range.ttl", "shapes_recommended.ttl"):
        found.parse(SHAPES / name, format="turtle")
    return found


def described(api: Api, record_id: str, media_type: str) -> Any:
    return api.client.get(f"/records/{record_id}", headers={"Accept": media_type})


def problems(data: Graph) -> list[tuple[str, Any, Any]]:
    """(severity, focus class, path) of every result of the shapes."""
    _conforms, report, _text = validate(data, shacl_graph=shapes(), allow_warnings=True)
    found = []
    for result in report.subjects(RDF.type, SH.ValidationResult):
        focus = report.value(result, SH.focusNode)
        kinds = set(data.objects(focus, RDF.type))
        kind = next((k for k in (DCAT.Dataset, DCAT.Distribution, FOAF.Agent) if k in kinds), None)
        severity = report.value(result, SH.resultSeverity).split("#")[-1]
        found.append((severity, kind, report.value(result, SH.resultPath)))
    return found


@pytest.mark.parametrize(
    ("media_type", "rdf_format"),
    [("text/turtle", "turtle"), ("application/rdf+xml", "xml")],
)
def test_a_data_sets_description_reads_back_and_meets_dcat_ap(
    api: Api, admin: Account, alice: Account, media_type: str, rdf_format: str
):
    api.client.post("/api/series", json={"slug": "daten", "title": "Daten"}, headers=admin.auth)
    report = api.create(alice, titel="Bericht")
    data = api.create(
        alice,
        "quote.csv",
        CSV,
        titel="Arbeitslosenquote",
        beschreibung="Quoten nach Jahr.",
        sachschlagwoerter="Arbeit, Quote",
        creators=json.dumps([ERIKA, INSTITUTE]),
        related_identifiers=json.dumps([link(report["id"], "IsSupplementTo")]),
        series=json.dumps({"slug": "daten", "number": "1"}),
    )
    response = described(api, data["id"], media_type)
    assert response.status_code == 200
    assert response.mimetype == media_type and "Accept" in response.vary
    g = Graph().parse(data=response.get_data(), format=rdf_format)
    page = URIRef(f"{BASE}/records/{data['id']}")
    [dataset] = g.subjects(RDF.type, DCAT.Dataset)
    assert dataset == page  # without a DOI, the page names it
    assert g.value(dataset, DCTERMS.title) == Literal("Arbeitslosenquote", lang="de")
    assert g.value(dataset, DCTERMS.description) == Literal("Quoten nach Jahr.", lang="de")
    assert {str(k) for k in g.objects(dataset, DCAT.keyword)} == {"Arbeit", "Quote"}
    assert g.value(dataset, DCAT.landingPage) == page
    assert set(g.objects(dataset, DCTERMS.relation)) == {URIRef(f"{BASE}/records/{report['id']}")}
    assert g.value(dataset, DCTERMS.isPartOf) == URIRef(f"{BASE}/series/daten")
    creators = {str(g.value(c, FOAF.name)): c for c in g.objects(dataset, DCTERMS.creator)}
    assert creators["Muster, Erika"] == URIRef(f"https://orcid.org/{ORCID}")
    assert (creators["Institut für Beispiele"], RDF.type, FOAF.Organization) in g
    [distribution] = g.objects(dataset, DCAT.distribution)
    download = URIRef(f"{BASE}/api/public/files/{data['id']}/download")
    assert g.value(distribution, DCAT.downloadURL) == download
    assert g.value(distribution, DCAT.byteSize).toPython() == len(CSV)
    assert g.value(distribution, DCTERMS.format) == URIRef(
        "http://publications.europa.eu/resource/authority/file-type/CSV"
    )
    checksum = g.value(distribution, SPDX.checksum)
    assert str(g.value(checksum, SPDX.checksumValue)) == api.row(data["id"]).checksum_sha256
    found = problems(g)
    assert [p for p in found if p[0] == "Violation"] == []
    assert {(kind, path) for _, kind, path in found} <= UNKNOWN


def test_under_embargo_it_has_no_download_and_still_meets_dcat_ap(api: Api, alice: Account):
    data = api.create(alice, "quote.csv", CSV, sperrfrist="2099-01-01")
    g = Graph().parse(data=described(api, data["id"], "text/turtle").get_data(), format="turtle")
    [distribution] = g.objects(None, DCAT.distribution)
    assert g.value(distribution, DCAT.downloadURL) is None
    assert str(g.value(distribution, DCTERMS.available)) == "2099-01-01"
    # No description: the title stands in, as DCAT-AP requires one.
    [dataset] = g.subjects(RDF.type, DCAT.Dataset)
    assert str(g.value(dataset, DCTERMS.description)) == "quote.csv"
    assert [p for p in problems(g) if p[0] == "Violation"] == []


def test_only_data_sets_are_described(api: Api, alice: Account):
    report = api.create(alice, "bericht.pdf", samples.pdf_bytes())
    refused = described(api, report["id"], "text/turtle")
    assert refused.status_code == 406
    assert "text/turtle" not in refused.get_data(as_text=True)
    # A browser's Accept still gets the page; an unknown id is 404.
    assert described(api, report["id"], "text/turtle, text/html;q=0.5").mimetype == "text/html"
    missing = "00000000-0000-4000-8000-000000000000"
    assert described(api, missing, "text/turtle").status_code == 404
    data = api.create(alice, "quote.csv", CSV)
    first = described(api, data["id"], "text/turtle")
    again = api.client.get(
        f"/records/{data['id']}",
        headers={"Accept": "text/turtle", "If-None-Match": first.headers["ETag"]},
    )
    assert again.status_code == 304
