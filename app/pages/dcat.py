"""A data set's DCAT-AP description (issue 49): what GovData and data.europa.eu harvest,
answered by a record's page to `Accept: text/turtle` or `application/rdf+xml` (only for data
sets: schema.org's `Dataset`, DataCite's `Dataset`). Built from the page's values with rdflib,
as DCAT-AP 3.0.0 describes a data set: title, description, identifier, publication and
modification dates, keywords, publisher and contact point, creators (their ORCID iD their
IRI), language, landing page, links, and one distribution with its access and (while it may
be downloaded) download address, format, media type, size and SHA-256. The tests check it
against DCAT-AP's SHACL shapes (tests/pages/dcat-ap-3.0.0/)."""

from __future__ import annotations

from rdflib import BNode, Graph, Literal, Namespace, URIRef
from rdflib.namespace import DCAT, DCTERMS, FOAF, RDF, XSD

from app.pages.records import RecordPage, schema_type

VCARD = Namespace("http://www.w3.org/2006/vcard/ns#")
SPDX = Namespace("http://spdx.org/rdf/terms#")
LANGUAGE = URIRef("http://publications.europa.eu/resource/authority/language/DEU")
FILE_TYPE = "http://publications.europa.eu/resource/authority/file-type/"
#: The EU's file types of the content types of data sets.
FILE_TYPES = {
    "text/csv": "CSV",
    "application/json": "JSON",
    "application/ld+json": "JSON_LD",
    "application/rdf+xml": "RDF_XML",
    "text/turtle": "RDF_TURTLE",
    "application/zip": "ZIP",
    "application/vnd.ms-excel": "XLS",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "XLSX",
    "application/vnd.oasis.opendocument.spreadsheet": "ODS",
}
#: What `/records/{id}` answers with the description, by `Accept`.
FORMATS = {"text/turtle": "turtle", "application/rdf+xml": "xml"}


def described(page: RecordPage) -> bool:
    """Whether the record is a data set, which DCAT describes."""
    return schema_type(page.mime_type) == "Dataset"


def graph(page: RecordPage) -> Graph:
    """The data set and its one distribution as an RDF graph."""
    g = Graph()
    g.bind("dcat", DCAT)
    g.bind("dct", DCTERMS)
    g.bind("foaf", FOAF)
    g.bind("vcard", VCARD)
    g.bind("spdx", SPDX)
    dataset = URIRef(page.cite_as)
    language = "de"
    g.add((dataset, RDF.type, DCAT.Dataset))
    g.add((dataset, DCTERMS.title, Literal(page.title, lang=language)))
    g.add((dataset, DCTERMS.description, Literal(page.description or page.title, lang=language)))
    g.add((dataset, DCTERMS.identifier, Literal(page.cite_as)))
    g.add((dataset, DCTERMS.issued, Literal(page.published, datatype=XSD.date)))
    if page.version_changed is not None:
        g.add((dataset, DCTERMS.modified, Literal(page.version_changed, datatype=XSD.date)))
    if page.version > 1:
        g.add((dataset, DCAT.version, Literal(str(page.version))))
    for word in dict.fromkeys(page.keywords + page.themes):
        g.add((dataset, DCAT.keyword, Literal(word, lang=language)))
    g.add((dataset, DCTERMS.language, LANGUAGE))
    g.add((LANGUAGE, RDF.type, DCTERMS.LinguisticSystem))
    landing = URIRef(page.urls.page)
    g.add((dataset, DCAT.landingPage, landing))
    g.add((landing, RDF.type, FOAF.Document))

    publisher = BNode()
    g.add((dataset, DCTERMS.publisher, publisher))
    g.add((publisher, RDF.type, FOAF.Agent))
    g.add((publisher, RDF.type, FOAF.Organization))
    g.add((publisher, FOAF.name, Literal(page.repository)))
    contact = BNode()
    g.add((dataset, DCAT.contactPoint, contact))
    g.add((contact, RDF.type, VCARD.Kind))
    g.add((contact, RDF.type, VCARD.Organization))
    g.add((contact, VCARD.fn, Literal(page.repository)))
    g.add((contact, VCARD.hasURL, URIRef(page.urls.page.rsplit("/records/", 1)[0] + "/")))

    for person in page.people:
        agent = URIRef(person.orcid) if person.orcid else BNode()
        g.add((dataset, DCTERMS.creator, agent))
        g.add((agent, RDF.type, FOAF.Agent))
        g.add((agent, RDF.type, FOAF.Organization if person.organisation else FOAF.Person))
        g.add((agent, FOAF.name, Literal(person.name)))
        if person.family:
            g.add((agent, FOAF.familyName, Literal(person.family)))
        if person.given:
            g.add((agent, FOAF.givenName, Literal(person.given)))
    for link in page.links:
        g.add((dataset, DCTERMS.relation, URIRef(link.url)))
    if page.series is not None:
        g.add((dataset, DCTERMS.isPartOf, URIRef(page.series.url)))

    distribution = BNode()
    g.add((dataset, DCAT.distribution, distribution))
    g.add((distribution, RDF.type, DCAT.Distribution))
    g.add((distribution, DCTERMS.title, Literal(page.file_name)))
    what = f"{page.file_name} ({page.mime_type}, {page.size} Byte)"
    g.add((distribution, DCTERMS.description, Literal(what, lang=language)))
    g.add((distribution, DCAT.accessURL, landing))
    if page.downloadable:
        g.add((distribution, DCAT.downloadURL, URIRef(page.urls.download)))
    media_type = URIRef(f"https://www.iana.org/assignments/media-types/{page.mime_type}")
    g.add((distribution, DCAT.mediaType, media_type))
    g.add((media_type, RDF.type, DCTERMS.MediaType))
    if page.mime_type in FILE_TYPES:
        file_type = URIRef(FILE_TYPE + FILE_TYPES[page.mime_type])
        g.add((distribution, DCTERMS.format, file_type))
        g.add((file_type, RDF.type, DCTERMS.MediaTypeOrExtent))
    # DCAT-AP 3.0.0 types the size xsd:decimal (DCAT 3 itself: xsd:nonNegativeInteger).
    g.add((distribution, DCAT.byteSize, Literal(str(page.size), datatype=XSD.decimal)))
    checksum = BNode()
    g.add((distribution, SPDX.checksum, checksum))
    g.add((checksum, RDF.type, SPDX.Checksum))
    g.add((checksum, SPDX.algorithm, SPDX.checksumAlgorithm_sha256))
    g.add((checksum, SPDX.checksumValue, Literal(page.sha256, datatype=XSD.hexBinary)))
    if page.embargo_until:  # when the content may be downloaded
        g.add((distribution, DCTERMS.available, Literal(page.embargo_until, datatype=XSD.date)))
    return g


def serialized(page: RecordPage, media_type: str) -> bytes:
    """The description in Turtle or RDF/XML."""
    return graph(page).serialize(format=FORMATS[media_type], encoding="utf-8")
