"""OAI-PMH's `oai_datacite` (issue 49, point 5), the format OpenAIRE and BASE harvest: offered
in ListMetadataFormats, every record's metadata valid against DataCite's OAI schema 1.1 and
its payload against the kernel-4.5 XSD, harvested by a real harvester (Sickle) across pages,
and the protocol's rules for a metadata format kept (the metadata's one element is in the
format's namespace and names its schema; deletions carry no metadata; a format the
repository does not offer is cannotDisseminateFormat; a token keeps its format)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from lxml import etree
from sickle import Sickle

from tests.files.test_creators import ERIKA, ORCID
from tests.files.test_related_identifiers import dataset, link
from tests.oai.test_oai import error_code, ident, oai, small_pages  # noqa: F401
from tests.support.api import Account, Api

HERE = Path(__file__).parent
OAI_DATACITE_XSD = etree.XMLSchema(etree.parse(str(HERE / "oai_datacite-1.1.xsd")))
KERNEL_XSD = etree.XMLSchema(
    etree.parse(str(HERE.parent / "pages" / "datacite-kernel-4.5" / "metadata.xsd"))
)
NAMESPACE = "http://schema.datacite.org/oai/oai-1.1/"
SCHEMA = "http://schema.datacite.org/oai/oai-1.1/oai.xsd"
NS = {
    "oai": "http://www.openarchives.org/OAI/2.0/",
    "od": NAMESPACE,
    "d": "http://datacite.org/schema/kernel-4",
}
XSI = "{http://www.w3.org/2001/XMLSchema-instance}schemaLocation"


def valid_metadata(record: Any) -> Any:
    """The record's `oai_datacite` element, checked by the format's rules; its resource."""
    [metadata] = record.findall("oai:metadata", NS)
    [root] = list(metadata)
    assert root.tag == f"{{{NAMESPACE}}}oai_datacite"
    assert root.get(XSI) == f"{NAMESPACE} {SCHEMA}"
    assert OAI_DATACITE_XSD.validate(root), OAI_DATACITE_XSD.error_log
    assert root.findtext("od:schemaVersion", namespaces=NS) == "4.5"
    [resource] = root.find("od:payload", NS)
    assert KERNEL_XSD.validate(resource), KERNEL_XSD.error_log
    return resource


def test_oai_datacite_is_offered_with_its_schema_and_namespace(api: Api):
    formats = oai(api, verb="ListMetadataFormats")
    offered = {
        f.findtext("oai:metadataPrefix", namespaces=NS): (
            f.findtext("oai:schema", namespaces=NS),
            f.findtext("oai:metadataNamespace", namespaces=NS),
        )
        for f in formats.iterfind(".//oai:metadataFormat", NS)
    }
    assert offered["oai_datacite"] == (SCHEMA, NAMESPACE)
    assert list(offered) == ["oai_dc", "oai_datacite"]


def test_a_record_as_oai_datacite(api: Api, alice: Account):
    data = dataset(api, alice)
    record = api.create(
        alice,
        titel="Bericht",
        creators=json.dumps([ERIKA]),
        related_identifiers=json.dumps([link(data["id"])]),
        sperrfrist="2099-01-01",
    )
    root = oai(api, verb="GetRecord", identifier=ident(record["id"]), metadataPrefix="oai_datacite")
    resource = valid_metadata(root.find(".//oai:record", NS))
    identifier = resource.find("d:identifier", NS)
    assert (identifier.get("identifierType"), identifier.text) == (
        "URL",
        f"http://localhost/records/{record['id']}",
    )
    assert resource.findtext("d:publicationYear", namespaces=NS) == "2099"
    orcid = resource.find("d:creators/d:creator/d:nameIdentifier", NS)
    assert orcid.text == f"https://orcid.org/{ORCID}"
    [related] = resource.findall("d:relatedIdentifiers/d:relatedIdentifier", NS)
    assert (related.get("relationType"), related.text) == (
        "IsSupplementedBy",
        f"http://localhost/records/{data['id']}",
    )
    assert root.find(".//od:datacentreSymbol", NS).text == "file-repository.local"
    unknown = oai(api, verb="GetRecord", identifier=ident(record["id"]), metadataPrefix="datacite")
    assert error_code(unknown) == "cannotDisseminateFormat"


def test_a_harvest_in_pages_keeps_the_format_and_deletions_carry_none(
    api: Api,
    alice: Account,
    server: str,
    small_pages,  # noqa: F811
):
    records = [api.create(alice, titel=f"Bericht {i}") for i in range(7)]
    assert api.delete(records[0]["id"], alice).status_code == 204
    first = oai(api, verb="ListRecords", metadataPrefix="oai_datacite")
    token = first.find(".//oai:resumptionToken", NS).text
    state = json.loads(base64.urlsafe_b64decode(token))
    assert state["prefix"] == "oai_datacite"
    harvested = {}
    for item in Sickle(server, max_retries=0).ListRecords(
        metadataPrefix="oai_datacite", ignore_deleted=False
    ):
        harvested[item.header.identifier] = item
    assert set(harvested) == {ident(r["id"]) for r in records}
    deleted = harvested[ident(records[0]["id"])]
    assert deleted.header.deleted and deleted.xml.find("oai:metadata", NS) is None
    for record in records[1:]:
        valid_metadata(harvested[ident(record["id"])].xml)
    forged = {**state, "prefix": "marc21"}
    token = base64.urlsafe_b64encode(json.dumps(forged).encode()).decode()
    refused = oai(api, verb="ListRecords", resumptionToken=token)
    assert error_code(refused) == "badResumptionToken"
