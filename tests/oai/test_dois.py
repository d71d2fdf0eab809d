"""OAI-PMH names a record's DOI (issue 40): its resolver address is a `dc:identifier`, first,
beside the record's addresses, in GetRecord and ListRecords alike (read by a harvester)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lxml import etree

from tests.oai.test_oai import NS, harvest, ident, oai
from tests.pages.test_dois import DATACITE, give_doi
from tests.support.api import Account, Api

OAI_DC_XSD = etree.XMLSchema(etree.parse(str(Path(__file__).parents[1] / "pages" / "oai_dc.xsd")))
DOI = "10.5072/fr-oai-0001"


def identifiers(api: Api, record_id: str) -> list[str]:
    root = oai(api, verb="GetRecord", metadataPrefix="oai_dc", identifier=ident(record_id))
    (dc,) = root.iterfind(".//oai_dc:dc", NS)
    OAI_DC_XSD.assertValid(dc)
    return [element.text for element in dc.iterfind("dc:identifier", NS)]


def test_the_doi_is_the_first_dc_identifier(api: Api, alice: Account, app: Any, server: str):
    with_doi = api.create(alice, "a.pdf", titel="Mit DOI")
    without = api.create(alice, "b.pdf", titel="Ohne DOI")
    give_doi(api, with_doi["id"], DOI)
    record_url = f"http://localhost/api/public/files/{with_doi['id']}"
    # DOIs off: the Doi row is not shown.
    assert identifiers(api, with_doi["id"]) == [record_url, f"{record_url}/download"]
    app.config.update(DATACITE)
    assert identifiers(api, with_doi["id"]) == [
        f"https://doi.org/{DOI}",
        record_url,
        f"{record_url}/download",
    ]
    assert not any("doi.org" in value for value in identifiers(api, without["id"]))
    harvested = harvest(server)
    assert harvested[ident(with_doi["id"])].metadata["identifier"][0] == f"https://doi.org/{DOI}"
    assert not any(
        "doi.org" in value for value in harvested[ident(without["id"])].metadata["identifier"]
    )
