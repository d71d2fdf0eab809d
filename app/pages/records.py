"""What a record's landing page shows, computed from the record as the public API reads it.

The machine-readable parts (Highwire `citation_*`, OpenGraph, schema.org JSON-LD) are built
here from plain values and dicts, never by string templates, so the template only prints them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import date
from decimal import ROUND_HALF_EVEN, Decimal
from functools import cache
from typing import Any

from babel.numbers import get_decimal_symbol
from babel.units import format_unit
from flask_babel import gettext as _
from markupsafe import Markup

from app.covers.services import Shown
from app.doi.lookup import url as doi_url
from app.doi.payload import DATASET_TYPES  # schema.org `Dataset`, as DataCite's `Dataset`
from app.files.access import RecordLike, embargo_active, publication_date
from app.pages.i18n import page_language
from app.schemas.attribution import GND_URL, ORCID_URL, ROR_URL, display_name, people_of

#: The page's language as OpenGraph names it (the metadata's own language stays German).
OG_LOCALES = {"de": "de_DE", "en": "en_GB"}
MEDIA_OBJECTS = {"audio": "AudioObject", "video": "VideoObject", "image": "ImageObject"}
PDF = "application/pdf"
#: What HTML calls a parse error in text: controls other than tab, newline and carriage return,
#: and noncharacters (the API keeps some of them, e.g. U+007F and U+0085).
_NOT_HTML = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufdd0-\ufdef"
    + "".join(chr(plane + 0xFFFE) + chr(plane + 0xFFFF) for plane in range(0, 0x110000, 0x10000))
    + "]"
)


@dataclass(frozen=True, slots=True)
class Urls:
    """The absolute addresses a page links to."""

    page: str
    download: str
    record_json: str
    preview: str
    oai_record: str
    folder_feed: str
    podcast_feed: str


@dataclass(frozen=True, slots=True)
class KeptVersion:
    """An earlier version a page lists: its number, when it was replaced, why, its SHA-256
    and the public address of its content."""

    number: int
    replaced: date
    note: str
    sha256: str
    size_text: str
    download: str


@dataclass(frozen=True, slots=True)
class ShownLink:
    """A link of the record as its page shows it (app/files/relations.py decided that the
    reader may see it): DataCite's relation type, the identifier, and what a reader follows:
    the linked record's title and page, or the DOI's or URL's address."""

    relation_type: str
    identifier_type: str
    identifier: str
    text: str
    href: str
    #: Of a record of this service: its id, schema.org type and DOI (if it has one).
    record_id: str | None = None
    schema_type: str | None = None
    doi: str | None = None
    inverse: bool = False

    @property
    def url(self) -> str:
        """Its address as an identifier: a DOI's resolver address where it has one."""
        return doi_url(self.doi) if self.doi else self.href


@dataclass(frozen=True, slots=True)
class Person:
    """A creator as the page and its exports show it (app/schemas/attribution.py): a person
    (`family`, `given`) or an organisation (`organisation`), its ORCID iD's and GND id's
    addresses, and its affiliations as (name, ROR address or None)."""

    name: str
    family: str | None = None
    given: str | None = None
    organisation: bool = False
    orcid: str | None = None
    gnd: str | None = None
    affiliations: tuple[tuple[str, str | None], ...] = ()

    @property
    def orcid_id(self) -> str | None:
        return self.orcid.removeprefix(ORCID_URL) if self.orcid else None


def person(creator: dict[str, Any]) -> Person:
    """A stored creator, cleaned for the page."""
    affiliations = tuple(
        (clean_text(a["name"]), ROR_URL + a["ror"] if a.get("ror") else None)
        for a in creator.get("affiliations", ())
    )
    return Person(
        name=clean_text(display_name(creator)),
        family=clean_text(creator.get("family_name")) or None,
        given=clean_text(creator.get("given_name")) or None,
        organisation="name" in creator,
        orcid=ORCID_URL + creator["orcid"] if creator.get("orcid") else None,
        gnd=GND_URL + creator["gnd"] if creator.get("gnd") else None,
        affiliations=affiliations,
    )


@dataclass(frozen=True, slots=True)
class SeriesRef:
    """The series a record is part of, as its page and exports name it."""

    slug: str
    title: str
    number: str
    url: str


@dataclass(slots=True)
class RecordPage:
    """Everything the record template prints, already cleaned and formatted."""

    id: str
    title: str
    authors: list[str]
    published: date
    description: str
    keywords: list[str]
    themes: list[str]
    #: (name, address of its folder page) of each folder from the top to the record's.
    breadcrumbs: list[tuple[str, str]]
    file_name: str
    mime_type: str
    size: int
    size_text: str
    #: The exact count of bytes where `size_text` rounds it, else None.
    exact_size_text: str | None
    sha256: str
    kind: str
    embargo_until: date | None
    urls: Urls
    repository: str
    meta: list[tuple[str, str]] = field(default_factory=list)
    properties: list[tuple[str, str]] = field(default_factory=list)
    json_ld: Markup = Markup("")
    table: list[list[str]] = field(default_factory=list)
    citation: Markup = Markup("")
    #: Downloads and page views by people, where the statistics are public (app/stats).
    reach: tuple[int, int] | None = None
    #: (label, address, media type) of each export.
    exports: list[tuple[str, str, str]] = field(default_factory=list)
    #: The content's version (app/files/versions.py), and the day it became the current one
    #: when a replacement made it (None for version 1).
    version: int = 1
    version_changed: date | None = None
    #: The earlier versions whose content is kept, newest first (KEEP_RELEASED_VERSIONS).
    kept_versions: list[KeptVersion] = field(default_factory=list)
    #: The record's DOI ("10.5072/abcd-1234", app/doi), None while it has none.
    doi: str | None = None
    #: Its cover picture (app/covers), only while the public may download its content.
    cover: Shown | None = None
    #: Its links the public may follow, its own first, then the inverse of others' (issue 49).
    links: list[ShownLink] = field(default_factory=list)
    #: The series it is part of, with its number there.
    series: SeriesRef | None = None
    #: Its creators, structured (`authors` are their names).
    people: list[Person] = field(default_factory=list)

    @property
    def kind_type(self) -> str:
        """Its schema.org type by its content (`Dataset`, `Report`, ...)."""
        return schema_type(self.mime_type)

    @property
    def newer_editions(self) -> list[ShownLink]:
        """The newer editions of this record the public may read (app/files/editions.py)."""
        return [link for link in self.links if link.relation_type == "IsPreviousVersionOf"]

    @property
    def link_groups(self) -> list[tuple[str, list[ShownLink]]]:
        """The links under the heading of their relation, in the order they first appear."""
        groups: dict[str, list[ShownLink]] = {}
        for link in self.links:
            groups.setdefault(relation_label(link, self), []).append(link)
        return list(groups.items())

    @property
    def doi_url(self) -> str | None:
        """The DOI's resolver address: what the page links and cites when there is one."""
        return doi_url(self.doi) if self.doi else None

    @property
    def cite_as(self) -> str:
        """The address to cite: the DOI's (a persistent identifier) where there is one, else
        the page's."""
        return self.doi_url or self.urls.page

    @property
    def downloadable(self) -> bool:
        return self.embargo_until is None


def clean_text(value: str | None) -> str:
    """`value` without the characters an HTML page cannot carry (they are dropped)."""
    return _NOT_HTML.sub("", value or "").strip()


def title_of(record: RecordLike) -> str:
    """The first of `titel` and `original_name` that keeps text once cleaned, else the id."""
    for candidate in (record.titel, record.original_name):
        if text := clean_text(candidate):
            return text
    return str(record.id)


def split_list(value: str | None, separators: str = ";,") -> list[str]:
    """A free-text list field as its items: split at any of `separators`, blanks dropped."""
    text = clean_text(value)
    for separator in separators[1:]:
        text = text.replace(separator, separators[0])
    return [item.strip() for item in text.split(separators[0]) if item.strip()]


def kind_of(mime_type: str) -> str:
    """How the page previews the content: `audio`, `video`, `image`, `pdf`, `csv` or `none`."""
    major = mime_type.partition("/")[0]
    if major in MEDIA_OBJECTS:
        return major
    return {PDF: "pdf", "text/csv": "csv"}.get(mime_type, "none")


def size_text(size: int) -> str:
    """A size as the reader writes it: `1,5 MB` in German, `1.5 MB` in English (powers of
    1000, as file managers do); below 1000 the bytes in the language's unit (`29 Byte`,
    `29 bytes`)."""
    if size < 1000:
        return _bytes_text(size, page_language())
    value, unit = float(size) / 1000, "kB"
    for next_unit in ("MB", "GB", "TB"):
        if value < 1000:
            break
        value, unit = value / 1000, next_unit
    # As Babel's format_decimal(value, format="0.0") writes it (a test compares them), in a
    # tenth of its time: a folder page has fifty sizes.
    tenths = Decimal(str(value)).quantize(_TENTH, ROUND_HALF_EVEN)
    return f"{str(tenths).replace('.', _decimal_symbol(page_language()))} {unit}"


_TENTH = Decimal("0.1")


def exact_size_text(size: int) -> str | None:
    """The exact count of bytes beside a rounded size (`1.552 Byte`, `1,552 bytes`); None
    where `size_text` is exact already."""
    if size < 1000:
        return None
    return format_unit(size, "digital-byte", length="long", locale=page_language())


@cache
def _bytes_text(size: int, language: str) -> str:
    """Babel's words for a count of bytes below 1000 (its plural rules), once per count."""
    return format_unit(size, "digital-byte", length="long", locale=language)


@cache
def _decimal_symbol(language: str) -> str:
    return get_decimal_symbol(language)


def json_ld_markup(data: dict[str, Any]) -> Markup:
    """JSON for a `<script>` element: `<`, `>` and `&` as JSON escapes, so no value can end
    the element or open a comment in it, and the JSON stays the same JSON."""
    text = json.dumps(data, ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text)


def crumbs(path: str | None, browse: str) -> list[tuple[str, str]]:
    """(name, address) of every folder from the top to `path`, the folder pages' addresses
    starting with `browse` (`.../browse/`)."""
    parts = [part for part in clean_text(path).split("/") if part]
    return [(part, browse + "/".join(parts[: i + 1])) for i, part in enumerate(parts)]


def record_page(
    record: RecordLike,
    today: date,
    urls: Urls,
    repository: str,
    browse: str = "/browse/",
    version_changed: date | None = None,
    doi: str | None = None,
    cover: Shown | None = None,
    links: list[ShownLink] | None = None,
    series: SeriesRef | None = None,
) -> RecordPage:
    """The page of one record the public may see; under embargo it offers no content. Its
    folders link to their pages under `browse`; `version_changed` is the day a replacement
    made its current version; `doi` is its DOI as readers see it (app/doi/lookup.py);
    `cover` its picture, given only while the content may be downloaded (app/covers);
    `links` and `series` what app/files/relations.py and its series lend it."""
    people = [person(creator) for creator in people_of(record)]
    people = [found for found in people if found.name]
    page = RecordPage(
        id=str(record.id),
        title=title_of(record),
        authors=[found.name for found in people],
        published=publication_date(record),
        description=clean_text(record.beschreibung),
        keywords=split_list(record.sachschlagwoerter),
        themes=split_list(record.org_themen),
        breadcrumbs=crumbs(record.path, browse),
        file_name=clean_text(record.original_name),
        mime_type=record.mime_type,
        size=record.size,
        size_text=size_text(record.size),
        exact_size_text=exact_size_text(record.size),
        sha256=record.checksum_sha256,
        kind=kind_of(record.mime_type),
        embargo_until=record.sperrfrist if embargo_active(record, today) else None,
        urls=urls,
        repository=repository,
        version=record.version,
        version_changed=version_changed,
        doi=doi,
        cover=None if embargo_active(record, today) else cover,
        links=links or [],
        series=series,
        people=people,
    )
    page.meta = highwire_tags(page)
    page.properties = open_graph_tags(page)
    page.json_ld = json_ld_markup(schema_org(page))
    return page


def signposting(page: RecordPage) -> list[tuple[str, str, str | None]]:
    """FAIR Signposting (`Link` header): (address, relation, media type); `cite-as` the
    DOI's address where the record has one (the persistent identifier), else the page's; the
    content's address (`item`) only while it can be downloaded."""
    links: list[tuple[str, str, str | None]] = [
        (page.cite_as, "cite-as", None),
        (page.urls.record_json, "describedby", "application/json"),
        (page.urls.oai_record, "describedby", "text/xml"),
        *((url, "describedby", media_type) for _, url, media_type in page.exports),
        (f"https://schema.org/{page_type(page)}", "type", None),
        ("https://schema.org/AboutPage", "type", None),
    ]
    if schema_type(page.mime_type) == "Dataset":  # its DCAT-AP description (app/pages/dcat.py)
        links.append((page.urls.page, "describedby", "text/turtle"))
    if page.downloadable:
        links.append((page.urls.download, "item", page.mime_type))
    return links


def link_header(links: list[tuple[str, str, str | None]]) -> str:
    """The `Link` header value of `links` (RFC 8288)."""
    return ", ".join(
        f'<{url}>; rel="{rel}"' + (f'; type="{media_type}"' if media_type else "")
        for url, rel, media_type in links
    )


def highwire_tags(page: RecordPage) -> list[tuple[str, str]]:
    """Google Scholar's `citation_*` tags; the PDF's address only while it can be downloaded."""
    tags = [("citation_title", page.title)]
    for found in page.people:
        tags.append(("citation_author", found.name))
        if found.orcid:
            tags.append(("citation_author_orcid", found.orcid))
        tags += [("citation_author_institution", name) for name, _ in found.affiliations]
    tags.append(("citation_publication_date", page.published.strftime("%Y/%m/%d")))
    if page.keywords:
        tags.append(("citation_keywords", "; ".join(page.keywords)))
    tags.append(("citation_publisher", page.repository))
    if citation_type(page) == "report":
        # What makes Zotero (and Scholar) take it for a report of this institution.
        tags.append(("citation_technical_report_institution", page.repository))
        if page.series is not None and page.series.number:
            tags.append(("citation_technical_report_number", page.series.number))
    if page.series is not None:
        tags.append(("citation_series_title", page.series.title))
    if page.doi:
        tags.append(("citation_doi", page.doi))
    # Dublin Core's type (DCMI Type Vocabulary): a reference manager's data set.
    tags.append(("DC.type", DCMI_TYPES.get(page_kind_type(page), "Text")))
    if page.kind == "pdf" and page.downloadable:
        tags.append(("citation_pdf_url", page.urls.download))
    large = page.kind == "image" or page.cover is not None
    tags.append(("twitter:card", "summary_large_image" if large else "summary"))
    tags.append(("twitter:title", page.title))
    if page.description:
        tags.append(("twitter:description", _summary(page.description)))
    if page.cover is not None:
        tags.append(("twitter:image", page.cover.url(1200, "jpg")))
        tags.append(("twitter:image:alt", cover_alt(page.title)))
    return tags


def cover_alt(title: str) -> str:
    """The alternative text of a record's cover picture, in the page's language."""
    return _("Titelbild: %(title)s", title=title)


def _summary(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def open_graph_tags(page: RecordPage) -> list[tuple[str, str]]:
    """OpenGraph, for link previews; the content itself only while it can be downloaded."""
    tags = [
        ("og:type", OG_TYPES.get(page.kind, "article")),
        ("og:title", page.title),
        ("og:url", page.urls.page),
        ("og:site_name", page.repository),
        ("og:locale", OG_LOCALES[page_language()]),
    ]
    if page.description:
        tags.append(("og:description", _summary(page.description)))
    if page.kind in MEDIA_OBJECTS and page.downloadable:
        tags.append((f"og:{page.kind}", page.urls.download))
        tags.append((f"og:{page.kind}:type", page.mime_type))
    if page.cover is not None:
        tags.append(("og:image", page.cover.url(1200, "jpg")))
        tags.append(("og:image:type", "image/jpeg"))
        tags.append(("og:image:width", "1200"))
        tags.append(("og:image:height", str(page.cover.height_at(1200))))
        tags.append(("og:image:alt", cover_alt(page.title)))
    return tags


#: OpenGraph's type of a record's content, where it has one (else `article`): what makes
#: Zotero take an audio or video record for a recording, not an article.
OG_TYPES = {"audio": "music.song", "video": "video.other"}
#: DCMI types of the schema.org types.
DCMI_TYPES = {
    "Dataset": "Dataset",
    "AudioObject": "Sound",
    "VideoObject": "MovingImage",
    "ImageObject": "StillImage",
}


def page_kind_type(page: RecordPage) -> str:
    return schema_type(page.mime_type)


def citation_type(page: RecordPage) -> str:
    """The record's CSL type (`report`, `dataset`, `song`, `motion_picture`, `graphic`)."""
    return {
        "Dataset": "dataset",
        "AudioObject": "song",
        "VideoObject": "motion_picture",
        "ImageObject": "graphic",
    }.get(schema_type(page.mime_type), "report")


def schema_type(mime_type: str) -> str:
    """The schema.org type of a record, from its content type."""
    if mime_type in DATASET_TYPES:
        return "Dataset"
    kind = kind_of(mime_type)
    if kind in MEDIA_OBJECTS:
        return MEDIA_OBJECTS[kind]
    return "Report" if kind == "pdf" else "CreativeWork"


def is_podcast_episode(page: RecordPage) -> bool:
    """Whether the podcast feed may list the record: audio the public may download now (the
    feed shows the newest of these)."""
    return page.kind == "audio" and page.downloadable


def page_type(page: RecordPage) -> str:
    """The schema.org type of the page's subject: a podcast episode, or its content's type."""
    return "PodcastEpisode" if is_podcast_episode(page) else schema_type(page.mime_type)


def schema_org(page: RecordPage) -> dict[str, Any]:
    """The schema.org description of the record (Google Dataset Search reads `Dataset`). With
    a DOI, the DOI's address is the work's `@id` (as signposting's `cite-as`) and its
    `identifier` the PropertyValue Google's dataset guidance shows; `url` stays the page."""
    data: dict[str, Any] = {
        "@context": "https://schema.org",
        "@type": page_type(page),
        "@id": page.cite_as,
        "url": page.urls.page,
        "name": page.title,
        "datePublished": page.published.isoformat(),
        "publisher": {"@type": "Organization", "name": page.repository},
        "inLanguage": "de",
        "version": page.version,
    }
    if page.doi:
        data["identifier"] = {
            "@type": "PropertyValue",
            "propertyID": "https://registry.identifiers.org/registry/doi",
            "value": f"doi:{page.doi}",
            "url": page.doi_url,
        }
    if page.version_changed is not None:
        data["dateModified"] = page.version_changed.isoformat()
    if page.description:
        data["description"] = page.description
    if page.people:
        data["author"] = [agent(found) for found in page.people]
    if page.series is not None:
        data["isPartOf"] = [series_ld(page.series)]
    for link in page.links:
        if link.relation_type in JSON_LD_RELATIONS:
            data.setdefault(JSON_LD_RELATIONS[link.relation_type], []).append(work(link))
    if page.keywords:
        data["keywords"] = page.keywords
    if page.themes:
        data["about"] = [{"@type": "Thing", "name": theme} for theme in page.themes]
    if page.cover is not None:
        data["thumbnailUrl"] = page.cover.url(200, "jpg")
        data["image"] = page.cover.url(1200, "jpg")
    content: dict[str, Any] = {
        "name": page.file_name,
        "encodingFormat": page.mime_type,
        "contentSize": str(page.size),
        "sha256": page.sha256,
    }
    if page.downloadable:
        content["contentUrl"] = page.urls.download
    if data["@type"] == "PodcastEpisode":
        data["associatedMedia"] = {"@type": "AudioObject", **content}
        data["partOfSeries"] = {
            "@type": "PodcastSeries",
            "name": page.repository,
            "url": page.urls.podcast_feed,
            "webFeed": page.urls.podcast_feed,
        }
    elif data["@type"] == "Dataset":
        data["distribution"] = [{"@type": "DataDownload", **content}]
    elif data["@type"] in MEDIA_OBJECTS.values():
        data.update({key: value for key, value in content.items() if key != "name"})
    else:
        data["encoding"] = {"@type": "MediaObject", **content}
    return data


def relation_label(link: ShownLink, page: RecordPage) -> str:
    """The heading a link stands under on the page, in the reader's language: what the
    linked resource is to this record ("Daten zu diesem Bericht" for the data set that
    supplements a report)."""
    relation = link.relation_type
    if relation == "IsSupplementedBy" and link.schema_type == "Dataset":
        if schema_type(page.mime_type) == "Report":
            return _("Daten zu diesem Bericht")
        return _("Daten dazu")
    labels = {
        "IsSupplementTo": _("Ergänzt"),
        "IsSupplementedBy": _("Ergänzt durch"),
        "References": _("Verweist auf"),
        "IsReferencedBy": _("Verwiesen von"),
        "Cites": _("Zitiert"),
        "IsCitedBy": _("Zitiert von"),
        "IsPartOf": _("Teil von"),
        "HasPart": _("Enthält"),
        "IsNewVersionOf": _("Frühere Ausgabe"),
        "IsPreviousVersionOf": _("Neuere Ausgabe"),
        "IsDerivedFrom": _("Abgeleitet von"),
        "IsSourceOf": _("Quelle für"),
        "IsVersionOf": _("Version von"),
        "HasVersion": _("Hat die Version"),
        "IsDocumentedBy": _("Dokumentiert durch"),
        "Documents": _("Dokumentiert"),
        "IsDescribedBy": _("Beschrieben durch"),
        "Describes": _("Beschreibt"),
    }
    return labels.get(relation) or _("Verknüpft (%(relation)s)", relation=relation)


#: schema.org's properties of DataCite's relation types, where it has one.
JSON_LD_RELATIONS = {
    "IsPartOf": "isPartOf",
    "HasPart": "hasPart",
    "References": "citation",
    "Cites": "citation",
    "IsDerivedFrom": "isBasedOn",
}


def agent(found: Person) -> dict[str, Any]:
    """A creator as schema.org's Person or Organization: its ORCID iD its `@id`, its GND id
    in `sameAs`, its affiliations as Organizations (their ROR id their `@id`)."""
    data: dict[str, Any] = {"@type": "Organization" if found.organisation else "Person"}
    if found.orcid:
        data["@id"] = found.orcid
    data["name"] = found.name
    if found.family:
        data["familyName"] = found.family
    if found.given:
        data["givenName"] = found.given
    if found.gnd:
        data["sameAs"] = found.gnd
    if found.affiliations:
        data["affiliation"] = [
            {"@type": "Organization", **({"@id": ror} if ror else {}), "name": name}
            for name, ror in found.affiliations
        ]
    return data


def series_ld(series: SeriesRef) -> dict[str, Any]:
    data: dict[str, Any] = {
        "@type": "CreativeWorkSeries",
        "@id": series.url,
        "name": series.title,
        "url": series.url,
    }
    if series.number:
        data["position"] = series.number
    return data


def work(link: ShownLink) -> dict[str, Any]:
    """A linked resource as schema.org names it: a record of this service as its type, its
    DOI's address its `@id`; a DOI or URL as a CreativeWork at that address."""
    if link.record_id is None:
        return {"@type": "CreativeWork", "@id": link.url, "url": link.url}
    return {"@type": link.schema_type, "@id": link.url, "name": link.text, "url": link.href}
