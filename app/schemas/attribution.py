"""Who made a record and what it belongs to (issue 49): structured creators with ORCID, GND and
ROR, related identifiers with DataCite's relation types, and a record's place in a series.

The identifiers are checked here, once, for every door (the API, tus, `flask import`): an
ORCID iD by its check character (ISO 7064 MOD 11-2), a ROR id by its checksum (ISO 7064
MOD 97-10 over its Crockford base-32 number), a GND id and a DOI by their form. A record
stores each structure as canonical JSON text (`canonical`), in its own column and in its
draft's and versions' (app/files/approval.py): one row keeps a record's whole public state.
How `creators` and the specification's `autoren` stay in step is told in docs/contract.md.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any, ClassVar

from marshmallow import (
    RAISE,
    Schema,
    ValidationError,
    fields,
    post_load,
    pre_load,
    validates_schema,
)

from app.schemas.field_types import STRING_MAX, Text

#: What `autoren` separates names with, and how a derived `autoren` joins them.
AUTHOR_SEPARATOR = ";"
AUTHOR_JOIN = "; "
MAX_CREATORS = 100
MAX_AFFILIATIONS = 10
MAX_RELATIONS = 100
URL_MAX = 2000
NUMBER_MAX = 64
SLUG_MAX = 64

ORCID_FORM = re.compile(r"[0-9]{4}-[0-9]{4}-[0-9]{4}-[0-9]{3}[0-9X]")
#: The forms of a GND id (persons, corporate bodies, subjects, works), as the Deutsche
#: Nationalbibliothek documents them (and Wikidata's property P227 checks).
GND_FORM = re.compile(
    r"1[0123]?[0-9]{7}[0-9X]|[47][0-9]{6}-[0-9]|[1-9][0-9]{0,7}-[0-9X]|3[0-9]{7}[0-9X]"
)
CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
ROR_FORM = re.compile(r"0[0-9a-hjkmnp-tv-z]{6}[0-9]{2}")
DOI_FORM = re.compile(r"10\.[0-9]{4,9}/\S+")
SLUG_FORM = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
#: A series' OAI-PMH setSpec is this and its slug: `~` is in no folder's setSpec (a path's
#: segments have none), so no folder's set can be a series'.
SERIES_SET = "series~"
#: Prefixes an identifier may be sent with; it is stored without.
ORCID_PREFIXES = ("https://orcid.org/", "http://orcid.org/")
GND_PREFIXES = ("https://d-nb.info/gnd/", "http://d-nb.info/gnd/")
ROR_PREFIXES = ("https://ror.org/", "http://ror.org/")
DOI_PREFIXES = ("https://doi.org/", "http://doi.org/", "https://dx.doi.org/", "doi:")

#: DataCite Metadata Schema 4.5's relation types, each with its inverse.
INVERSE = {
    "IsCitedBy": "Cites",
    "IsSupplementTo": "IsSupplementedBy",
    "IsContinuedBy": "Continues",
    "IsDescribedBy": "Describes",
    "HasMetadata": "IsMetadataFor",
    "HasVersion": "IsVersionOf",
    "IsNewVersionOf": "IsPreviousVersionOf",
    "IsPartOf": "HasPart",
    "IsPublishedIn": "IsPublishedIn",
    "IsReferencedBy": "References",
    "IsDocumentedBy": "Documents",
    "IsCompiledBy": "Compiles",
    "IsVariantFormOf": "IsOriginalFormOf",
    "IsIdenticalTo": "IsIdenticalTo",
    "IsReviewedBy": "Reviews",
    "IsDerivedFrom": "IsSourceOf",
    "IsRequiredBy": "Requires",
    "IsObsoletedBy": "Obsoletes",
    "IsCollectedBy": "Collects",
}
INVERSE |= {inverse: relation for relation, inverse in INVERSE.items()}
RELATION_TYPES = tuple(sorted(INVERSE))
IDENTIFIER_TYPES = ("DOI", "URL", "record")


def orcid_check(digits: str) -> str:
    """The check character of an ORCID iD's first 15 digits (ISO 7064 MOD 11-2)."""
    total = 0
    for digit in digits:
        total = (total + int(digit)) * 2
    result = (12 - total % 11) % 11
    return "X" if result == 10 else str(result)


def ror_valid(ror: str) -> bool:
    """Whether `ror` is a ROR id: 0, six Crockford base-32 characters, and the two digits of
    their number's checksum (ISO 7064 MOD 97-10)."""
    if not ROR_FORM.fullmatch(ror):
        return False
    number = 0
    for char in ror[1:7]:
        number = number * 32 + CROCKFORD.index(char)
    return 98 - (number * 100) % 97 == int(ror[7:])


def _without(value: str, prefixes: tuple[str, ...]) -> str:
    lowered = value.lower()
    for prefix in prefixes:
        if lowered.startswith(prefix):
            return value[len(prefix) :]
    return value


class _Identifier(Text):
    """An identifier: its address form is accepted and stored bare."""

    prefixes: ClassVar[tuple[str, ...]] = ()

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str | None:
        text = super()._deserialize(value, attr, data, **kwargs)
        return None if text is None else self.checked(_without(text, self.prefixes).strip())

    def checked(self, value: str) -> str:
        raise NotImplementedError


class Orcid(_Identifier):
    openapi: ClassVar[dict[str, Any]] = {"type": "string", "pattern": ORCID_FORM.pattern}
    prefixes = ORCID_PREFIXES

    def checked(self, value: str) -> str:
        value = value.upper()
        if not ORCID_FORM.fullmatch(value):
            raise ValidationError(
                "The orcid field must be an ORCID iD of four groups of four digits "
                "(0000-0002-1825-0097), the last character a digit or X."
            )
        if orcid_check(value.replace("-", "")[:15]) != value[-1]:
            raise ValidationError(
                "The orcid field is not an ORCID iD: its check character does not match "
                "(ISO 7064 MOD 11-2); a digit is mistyped."
            )
        return value


class Gnd(_Identifier):
    openapi: ClassVar[dict[str, Any]] = {"type": "string", "pattern": GND_FORM.pattern}
    prefixes = GND_PREFIXES

    def checked(self, value: str) -> str:
        value = value.upper()
        if not GND_FORM.fullmatch(value):
            raise ValidationError(
                "The gnd field must be a GND id of the Deutsche Nationalbibliothek "
                "(118540238, 2026405-0)."
            )
        return value


class Ror(_Identifier):
    openapi: ClassVar[dict[str, Any]] = {"type": "string", "pattern": ROR_FORM.pattern}
    prefixes = ROR_PREFIXES

    def checked(self, value: str) -> str:
        value = value.lower()
        if not ROR_FORM.fullmatch(value):
            raise ValidationError(
                "The ror field must be a ROR id: 0, six letters or digits and two check "
                "digits (05gq02987)."
            )
        if not ror_valid(value):
            raise ValidationError(
                "The ror field is not a ROR id: its check digits do not match; a character "
                "is mistyped."
            )
        return value


def required(name: str) -> dict[str, str]:
    """Laravel's wording of a missing field, and of one that is null."""
    message = f"The {name} field is required."
    return {"required": message, "null": message}


class _Strict(Schema):
    """A nested object of the fields named and no others."""

    class Meta:
        unknown = RAISE

    @pre_load
    def an_object(self, data: Any, **kwargs: Any) -> Any:
        if not isinstance(data, dict):
            raise ValidationError(["Must be a JSON object."])
        return data

    @post_load
    def without_nulls(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {key: value for key, value in data.items() if value not in (None, [])}


class AffiliationSchema(_Strict):
    name = Text(
        required=True,
        allow_none=False,
        error_messages=required("name"),
        metadata={"description": "The organisation's name."},
    )
    ror = Ror(metadata={"description": "Its ROR id (https://ror.org/...), checked."})


class CreatorSchema(_Strict):
    class Meta(_Strict.Meta):
        description = (
            "A person (`family_name`, `given_name`) or an organisation (`name`), with "
            "identifiers; keys without a value are left out."
        )

    name = Text(metadata={"description": "An organisation's name (instead of a person's)."})
    family_name = Text(metadata={"description": "A person's family name."})
    given_name = Text(metadata={"description": "A person's given name(s)."})
    orcid = Orcid(metadata={"description": "A person's ORCID iD, its check character checked."})
    gnd = Gnd(metadata={"description": "A GND id (person or organisation)."})
    affiliations = fields.List(
        fields.Nested(AffiliationSchema),
        validate=lambda items: len(items) <= MAX_AFFILIATIONS or _too_many(MAX_AFFILIATIONS),
        metadata={"maxItems": MAX_AFFILIATIONS},
    )

    @validates_schema
    def a_person_or_an_organisation(self, data: dict[str, Any], **kwargs: Any) -> None:
        person = data.get("family_name") or data.get("given_name")
        if data.get("name") and person:
            raise ValidationError(
                "A creator is a person (family_name, given_name) or an organisation (name), "
                "not both.",
                "name",
            )
        if not data.get("name") and not data.get("family_name"):
            raise ValidationError(
                "The family_name field is required (an organisation: name).", "family_name"
            )
        if data.get("name") and data.get("orcid"):
            raise ValidationError("An ORCID iD names a person, not an organisation.", "orcid")
        for key in ("name", "family_name", "given_name"):
            if AUTHOR_SEPARATOR in (data.get(key) or ""):
                raise ValidationError(
                    f"The {key} field must not contain ';', which separates the names of autoren.",
                    key,
                )


def _too_many(most: int) -> bool:
    raise ValidationError(f"Must not have more than {most} items.")


class RelatedIdentifierSchema(_Strict):
    class Meta(_Strict.Meta):
        description = (
            "A link to another resource: another record of this service by its id "
            "(`record`), a DOI or a URL, with DataCite's relation type (this record "
            "`IsSupplementTo` the identified one, ...)."
        )

    relation_type = fields.String(
        required=True,
        error_messages=required("relation_type"),
        validate=lambda value: value in INVERSE or _not_relation(),
        metadata={"enum": list(RELATION_TYPES)},
    )
    identifier = Text(
        max_length=URL_MAX,
        required=True,
        error_messages=required("identifier"),
        metadata={"description": "The record's id, the DOI (bare or as its address), or the URL."},
    )
    identifier_type = fields.String(
        required=True,
        error_messages=required("identifier_type"),
        validate=lambda value: value in IDENTIFIER_TYPES or _not_identifier_type(),
        metadata={"enum": list(IDENTIFIER_TYPES)},
    )

    @validates_schema
    def an_identifier(self, data: dict[str, Any], **kwargs: Any) -> None:
        if not data.get("identifier"):
            raise ValidationError("The identifier field is required.", "identifier")
        if data.get("identifier_type") in IDENTIFIER_TYPES:
            normalised_identifier(data["identifier_type"], data["identifier"])

    @post_load
    def normalised(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        data["identifier"] = normalised_identifier(data["identifier_type"], data["identifier"])
        return data


def _not_relation() -> bool:
    raise ValidationError(
        "The relation_type field must be one of DataCite's relation types "
        f"({', '.join(RELATION_TYPES)})."
    )


def _not_identifier_type() -> bool:
    raise ValidationError(
        f"The identifier_type field must be one of {', '.join(IDENTIFIER_TYPES)}."
    )


def normalised_identifier(kind: str, value: str) -> str:
    """A related identifier in its stored form: a record's id in canonical lowercase, a DOI
    bare and lowercase (DOIs are case-insensitive), a URL as given; a malformed one raises."""
    value = value.strip()
    if kind == "record":
        try:
            return str(uuid.UUID(value))
        except ValueError:
            raise ValidationError(
                "The identifier field must be a record id (a UUID).", "identifier"
            ) from None
    if kind == "DOI":
        doi = _without(value, DOI_PREFIXES).strip().lower()
        if not DOI_FORM.fullmatch(doi) or len(doi) > STRING_MAX:
            raise ValidationError(
                "The identifier field must be a DOI (10.1234/abc, or its https://doi.org/ "
                "address).",
                "identifier",
            )
        return doi
    if (
        not re.fullmatch(r"https?://[^\s/?#]+\.[^\s/?#]+(?:[/?#]\S*)?", value)
        or len(value) > URL_MAX
    ):
        raise ValidationError(
            f"The identifier field must be an http or https address without spaces, at most "
            f"{URL_MAX} characters.",
            "identifier",
        )
    return value


class SeriesPlaceSchema(_Strict):
    class Meta(_Strict.Meta):
        description = "The series the record belongs to (by its slug) and its number in it."

    slug = fields.String(
        required=True,
        error_messages=required("slug"),
        metadata={
            "description": "The series' slug (`POST /api/series`).",
            "pattern": SLUG_FORM.pattern,
        },
    )
    number = Text(
        max_length=NUMBER_MAX,
        metadata={"description": "Its number in the series (`7/2026`, `12`), or null."},
    )

    @pre_load
    def number_as_text(self, data: Any, **kwargs: Any) -> Any:
        if (
            isinstance(data, dict)
            and isinstance(data.get("number"), int)
            and not isinstance(data["number"], bool)
        ):
            return {**data, "number": str(data["number"])}
        return data

    @validates_schema
    def a_slug(self, data: dict[str, Any], **kwargs: Any) -> None:
        if not SLUG_FORM.fullmatch(data.get("slug", "")) or len(data["slug"]) > SLUG_MAX:
            raise ValidationError(
                "The slug field must be lowercase letters and digits in words joined by "
                f"single hyphens, at most {SLUG_MAX} characters.",
                "slug",
            )


class JsonInput(fields.Field):
    """A structured field as a JSON value, or as its JSON text (multipart forms send text):
    loaded by `schema` (`many`: a list of its objects); null, an empty string and, for a list,
    `[]` mean none."""

    def __init__(self, schema: type[Schema], *, many: bool, most: int = 0, **kwargs: Any) -> None:
        kwargs.setdefault("allow_none", True)
        super().__init__(**kwargs)
        self.schema, self.many, self.most = schema, many, most
        item = {"$ref": f"#/components/schemas/{schema.__name__.removesuffix('Schema')}"}
        shape = {"type": "array", "items": item, "maxItems": most} if many else item
        self.openapi = {
            "anyOf": [
                shape,
                {"type": "string", "description": "The same as JSON text."},
                {"type": "null"},
            ]
        }

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        label = self.data_key or self.name
        if isinstance(value, str):
            if not value.strip():
                return None
            try:
                value = json.loads(value)
            except ValueError:
                raise ValidationError(
                    f"The {label} field must be JSON ({'a list' if self.many else 'an object'})."
                ) from None
        if value is None:
            return None
        if self.many and not isinstance(value, list):
            raise ValidationError(f"The {label} field must be a JSON list.")
        if self.many and len(value) > self.most:
            raise ValidationError(f"The {label} field must not have more than {self.most} items.")
        items = value if self.many else [value]
        if not_objects := {
            i: ["Must be a JSON object."] for i, v in enumerate(items) if not isinstance(v, dict)
        }:
            raise ValidationError(
                not_objects if self.many else f"The {label} field must be a JSON object."
            )
        return self.schema(many=self.many).load(value)


def canonical(value: Any) -> str | None:
    """The stored JSON text of a structure (None for none): keys sorted, no spaces, UTF-8."""
    if value in (None, []):
        return None
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def parsed(text: str | None) -> Any:
    """A stored structure back as JSON values (None for none)."""
    return None if text is None else json.loads(text)


def display_name(creator: dict[str, Any]) -> str:
    """A creator as `autoren` writes it: "Family, Given" for a person, an organisation's name."""
    if "name" in creator:
        return creator["name"]
    given = creator.get("given_name")
    return f"{creator['family_name']}, {given}" if given else creator["family_name"]


def autoren_of(creators: list[dict[str, Any]] | None) -> str | None:
    """The `autoren` of a structured list: its names joined by "; " (None for none)."""
    return AUTHOR_JOIN.join(display_name(creator) for creator in creators) if creators else None


def creator_of_name(name: str) -> dict[str, Any]:
    """A creator from one name of `autoren`: "Last, First" is a person, any other form an
    organisation's (or a single) name, kept whole."""
    family, comma, given = name.partition(",")
    if comma and family.strip() and given.strip():
        return {"family_name": family.strip(), "given_name": given.strip()}
    return {"name": name.strip()}


def names_of(autoren: str | None) -> list[str]:
    """The names of an `autoren` statement, split at ';' (blanks dropped)."""
    return [name.strip() for name in (autoren or "").split(AUTHOR_SEPARATOR) if name.strip()]


def rebuilt(autoren: str | None, creators: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """`creators` after a client that knows only `autoren` changed it: one creator a name,
    in its order; a name a creator already has keeps that creator (its identifiers and
    affiliations), a new one becomes a creator of its own."""
    known = {display_name(creator): creator for creator in creators}
    found = [known.get(name) or creator_of_name(name) for name in names_of(autoren)]
    return found or None


def derived_autoren(creators: list[dict[str, Any]] | None) -> str | None:
    """`autoren_of`, refused when it would not fit `autoren` (255 characters)."""
    text = autoren_of(creators)
    if text is not None and len(text) > STRING_MAX:
        raise ValidationError(
            f"The creators' names make an autoren of {len(text)} characters; autoren holds "
            f"at most {STRING_MAX} (the specification's limit)."
        )
    return text


class SeriesPlace(fields.Nested):
    """A record's `series` in its answers, from its two columns (`series_slug`,
    `series_number`): `{"slug", "number"}`, or null."""

    columns = ("series_slug", "series_number")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(SeriesPlaceSchema, allow_none=True, **kwargs)

    def serialize(self, attr: str, obj: Any, accessor: Any = None, **kwargs: Any) -> Any:
        return series_place(*(getattr(obj, name) for name in self.columns))


def series_place(slug: str | None, number: str | None) -> dict[str, Any] | None:
    return None if slug is None else {"slug": slug, "number": number}


class StoredList(fields.List):
    """A structured list a record keeps as JSON text (`canonical`), in its answers: the list
    (`[]` or null for none, as `empty` says)."""

    def __init__(self, inner: Any, *, empty: Any, **kwargs: Any) -> None:
        super().__init__(inner, allow_none=empty is None, **kwargs)
        self.empty = empty

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        if value is None:
            return None if self.empty is None else []
        return parsed(value) if isinstance(value, str) else value


#: The record's columns of issue 49 (`FileRecord`, and every row of `file_versions`).
STRUCTURED = ("creators", "related_identifiers", "series_slug", "series_number")


def structures(source: Any) -> dict[str, Any]:
    """The structured fields of a record, a draft or a version as its answers show them:
    `creators` (None: none), `related_identifiers` (None: none) and `series`."""
    return {
        "creators": parsed(source.creators),
        "related_identifiers": parsed(source.related_identifiers),
        "series": series_place(source.series_slug, source.series_number),
    }


def shown_values(values: dict[str, Any], source: Any, plain: Any) -> dict[str, Any]:
    """Column values (`values`, of `source`) under the names and in the form of the record
    answers: the stored structures parsed, the series' two columns as `series`."""
    shown: dict[str, Any] = {}
    for name, value in values.items():
        if name in ("series_slug", "series_number"):
            shown["series"] = series_place(source.series_slug, source.series_number)
        elif name == "creators":
            shown[name] = parsed(value)
        elif name == "related_identifiers":
            shown[name] = parsed(value) or []
        else:
            shown[name] = plain(value)
    return shown


def in_step(changes: dict[str, Any], current: Any) -> dict[str, Any]:
    """A change's `autoren` and `creators` kept in step with what the record (or its draft)
    has now (`current`): `autoren` sent without `creators` to a record with structured
    creators renames them (`rebuilt`): the same names keep everything, a removed name takes
    its creator along, a new one is a creator of its own. (`creators` sent set `autoren`
    already, MetadataSchema.)"""
    stored = parsed(current.creators)
    if "autoren" not in changes or "creators" in changes or stored is None:
        return changes
    if names_of(changes["autoren"]) == names_of(current.autoren):
        return changes
    return {**changes, "creators": canonical(rebuilt(changes["autoren"], stored))}


def stored_form(answer: dict[str, Any]) -> dict[str, Any]:
    """The structured fields of a record answer as the record's columns hold them."""
    place = answer.get("series") or {}
    return {
        "creators": canonical(answer.get("creators")),
        "related_identifiers": canonical(answer.get("related_identifiers")),
        "series_slug": place.get("slug"),
        "series_number": place.get("number"),
    }


def series_line(title: str, number: str | None) -> str:
    """A place in a series as one line, as Dublin Core's `dc:relation` carries it:
    "IAB-Forschungsbericht; 7/2026"."""
    return f"{title}; {number}" if number else title


def people_of(record: Any) -> list[dict[str, Any]]:
    """A record's creators, structured: its `creators`, or without them the names of its
    `autoren` ("Family, Given" a person, any other name an organisation's, kept whole)."""
    stored = parsed(record.creators)
    if stored is not None:
        return stored
    return [creator_of_name(name) for name in names_of(record.autoren)]


ORCID_URL = "https://orcid.org/"
GND_URL = "https://d-nb.info/gnd/"
ROR_URL = "https://ror.org/"
