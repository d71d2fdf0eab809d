"""OAI-PMH identifiers are `oai:<OAI_NAMESPACE>:<id>` whatever address a harvester uses."""

from __future__ import annotations

from pathlib import Path

from lxml import etree

from tests.files.test_list import insert_rows
from tests.oai.test_oai import LONG_AGO, NS, oai
from tests.support.api import Account, Api

IDENTIFIER_XSD = etree.XMLSchema(etree.parse(str(Path(__file__).with_name("oai-identifier.xsd"))))
ID_NS = {"id": "http://www.openarchives.org/OAI/2.0/oai-identifier"}


def identifiers(api: Api, **headers: str) -> list[str]:
    response = api.client.get(
        "/oai",
        query_string={"verb": "ListIdentifiers", "metadataPrefix": "oai_dc"},
        headers=headers,
    )
    assert response.status_code == 200
    root = etree.fromstring(response.data)
    return [e.text for e in root.iterfind(".//oai:header/oai:identifier", NS)]


def test_identifiers_do_not_change_with_the_host_or_the_base_url(api: Api, alice: Account):
    (record_id,) = insert_rows(api, alice, [{"created_at": LONG_AGO}])
    expected = [f"oai:file-repository.local:{record_id}"]
    api.app.config["TRUSTED_HOSTS"] = ["localhost", "mirror.example.org"]
    assert identifiers(api) == expected
    assert identifiers(api, Host="mirror.example.org") == expected
    api.app.config["PUBLIC_BASE_URL"] = "https://files.example.org"
    assert identifiers(api) == expected
    root = oai(api, verb="GetRecord", identifier=expected[0], metadataPrefix="oai_dc")
    assert root.findtext(".//oai:header/oai:identifier", namespaces=NS) == expected[0]


def test_the_namespace_is_a_setting_and_identify_names_it(api: Api, alice: Account):
    (record_id,) = insert_rows(api, alice, [{"created_at": LONG_AGO}])
    api.app.config["OAI_NAMESPACE"] = "repository.example.org"
    assert identifiers(api) == [f"oai:repository.example.org:{record_id}"]
    old = oai(
        api,
        verb="GetRecord",
        identifier=f"oai:file-repository.local:{record_id}",
        metadataPrefix="oai_dc",
    )
    assert old.find("oai:error", NS).get("code") == "idDoesNotExist"

    description = oai(api, verb="Identify").find("oai:Identify/oai:description", NS)
    (element,) = description
    IDENTIFIER_XSD.assertValid(element)
    assert element.findtext("id:repositoryIdentifier", namespaces=ID_NS) == (
        "repository.example.org"
    )
    assert element.findtext("id:sampleIdentifier", namespaces=ID_NS).startswith(
        "oai:repository.example.org:"
    )


def test_the_default_namespace_is_valid_for_identify(api: Api):
    (element,) = oai(api, verb="Identify").find("oai:Identify/oai:description", NS)
    IDENTIFIER_XSD.assertValid(element)
    assert element.findtext("id:repositoryIdentifier", namespaces=ID_NS) == "file-repository.local"
