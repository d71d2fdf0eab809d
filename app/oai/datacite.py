"""OAI-PMH's `oai_datacite` (DataCite OAI Schema 1.1), the format OpenAIRE and BASE harvest: a
record's DataCite metadata (kernel 4.5), as the DOIs' payload (app/doi/payload.py) has it,
wrapped with the schema's version and the data centre's symbol. A record without a DOI is
identified by its landing page, as the DataCite XML export does (app/pages/exports.py)."""

from __future__ import annotations

from typing import Any

from datacite import schema45
from flask import current_app
from lxml import etree

from app.doi import payload
from app.oai import xml as oai_xml

NAMESPACE = "http://schema.datacite.org/oai/oai-1.1/"
SCHEMA = "http://schema.datacite.org/oai/oai-1.1/oai.xsd"
KERNEL = "http://datacite.org/schema/kernel-4"


def symbol() -> str:
    """The data centre's symbol: the DataCite repository's where DOIs are on, else the OAI
    namespace (the schema asks for one)."""
    config = current_app.config
    return config.get("DATACITE_REPOSITORY") or config.get("OAI_NAMESPACE") or "file-repository"


def resource(
    record: Any,
    *,
    doi: str | None,
    landing: str,
    related: list[dict[str, Any]],
    series: dict[str, Any] | None,
) -> Any:
    """The record's DataCite `resource` element (checked against the 4.5 JSON schema)."""
    attributes = payload.attributes(
        record,
        doi or "",
        landing_url=landing,
        publisher=current_app.config["REPOSITORY_NAME"],
        available=record.sperrfrist,
        related=related,
        series=series,
    )
    if not doi:
        del attributes["doi"]
    payload.validate(attributes)  # raises on a mapping error: a bug here, never input
    root = schema45.dump_etree(payload.schema_shape(attributes))
    if not doi:  # the schema requires an identifier; the package writes one only from a DOI
        identifier = etree.SubElement(root, f"{{{KERNEL}}}identifier", identifierType="URL")
        identifier.text = oai_xml.xml_text(landing)
    return root


def oai_datacite(parent: Any, record: Any, **values: Any) -> None:
    """The record as `oai_datacite` in an OAI-PMH answer (`values`: those of `resource`)."""
    metadata = oai_xml.sub(parent, f"{{{oai_xml.OAI}}}metadata")
    root = etree.SubElement(
        metadata, f"{{{NAMESPACE}}}oai_datacite", nsmap={None: NAMESPACE, "xsi": oai_xml.XSI}
    )
    root.set(f"{{{oai_xml.XSI}}}schemaLocation", f"{NAMESPACE} {SCHEMA}")
    oai_xml.sub(root, f"{{{NAMESPACE}}}schemaVersion", "4.5")
    oai_xml.sub(root, f"{{{NAMESPACE}}}datacentreSymbol", symbol())
    oai_xml.sub(root, f"{{{NAMESPACE}}}payload").append(resource(record, **values))
