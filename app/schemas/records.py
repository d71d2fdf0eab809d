"""Marshmallow schemas: the validation rules of the API's record input and the JSON shape of
its records.

Field names stay as the API spells them. Messages follow Laravel's wording, because existing
clients of the original service show them to people. In what the OpenAPI document shows
(`metadata`, `Meta.description`), a limit's name in braces is this instance's limit
(`{max_files}`, app/docs/openapi.py `LIMITS`).
"""

from __future__ import annotations

from typing import Any

from marshmallow import (
    EXCLUDE,
    Schema,
    ValidationError,
    fields,
    post_load,
    pre_load,
)

from app.detection.mime import ALLOWED_MIME_TYPES
from app.schemas.about import about, query_about
from app.schemas.attribution import (
    MAX_CREATORS,
    MAX_RELATIONS,
    CreatorSchema,
    JsonInput,
    RelatedIdentifierSchema,
    SeriesPlace,
    SeriesPlaceSchema,
    StoredList,
    canonical,
    derived_autoren,
    display_name,
    names_of,
)
from app.schemas.field_types import (
    BESCHREIBUNG_MAX,
    CalendarDate,
    Cursor,
    Flag,
    Int32,
    PageNumber,
    PlainString,
    ReleaseFilter,
    Since,
    Text,
    Timestamp,
    Upload,
    VirtualPath,
)

#: Names older clients send for a field, accepted on input only.
INPUT_ALIASES = {"iab_themen": "org_themen"}


class MetadataSchema(Schema):
    """The business metadata a client may set on create and update."""

    aktiv_id = Text(metadata=about("aktiv_id"))
    path = VirtualPath(metadata=about("path"))
    reprotyp = Text(metadata=about("reprotyp"))
    titel = Text(metadata=about("titel"))
    beschreibung = Text(max_length=BESCHREIBUNG_MAX, metadata=about("beschreibung"))
    autoren = Text(metadata=about("autoren"))
    sachschlagwoerter = Text(metadata=about("sachschlagwoerter"))
    org_themen = Text(metadata=about("org_themen"))
    sperrfrist = CalendarDate(allow_none=True, metadata=about("sperrfrist"))
    reihenfolge = Int32(metadata=about("reihenfolge"))
    freigabe = Flag(metadata=about("freigabe"))
    erstellt_von = Text(metadata=about("erstellt_von"))
    freigegeben_von = Text(metadata=about("freigegeben_von"))
    # The original service's name of org_themen, which existing clients still send.
    iab_themen = Text(
        load_only=True,
        metadata={
            "description": "The original service's name of org_themen, accepted on input; "
            "when both are sent they must be equal. Answers carry both names.",
            "deprecated": True,
        },
    )
    creators = JsonInput(CreatorSchema, many=True, most=MAX_CREATORS, metadata=about("creators"))
    related_identifiers = JsonInput(
        RelatedIdentifierSchema,
        many=True,
        most=MAX_RELATIONS,
        metadata=about("related_identifiers"),
    )
    # Loaded into the record's two columns (`series_slug`, `series_number`).
    series = JsonInput(SeriesPlaceSchema, many=False, load_only=True, metadata=about("series"))

    @post_load
    def structures(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        """The structured fields as the record's columns: canonical JSON text, the series'
        two columns, and `autoren` from `creators` (docs/contract.md)."""
        if "creators" in data:
            creators = data["creators"]
            if creators is None:
                pass  # the structure goes; autoren stays the statement of authors
            else:
                try:
                    derived = derived_autoren(creators)
                except ValidationError as exc:
                    raise ValidationError(exc.messages, "creators") from None
                sent = data.get("autoren", derived)
                if names_of(sent) != [display_name(creator) for creator in creators]:
                    raise ValidationError(
                        [
                            "The autoren field must name the creators, in their order, when "
                            f"both are sent ({derived or 'null'}); send one of them."
                        ],
                        "autoren",
                    )
                data["autoren"] = derived if sent is None or derived is None else sent
                data["creators"] = canonical(creators)
        if "related_identifiers" in data:
            links = data["related_identifiers"] or []
            unique = list({canonical(link): link for link in links}.values())
            data["related_identifiers"] = canonical(unique)
        if "series" in data:
            place = data.pop("series") or {}
            data["series_slug"] = place.get("slug")
            data["series_number"] = place.get("number")
        return data

    @post_load
    def merge_iab_themen(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if "iab_themen" not in data:
            return data
        alias = data.pop("iab_themen")
        if "org_themen" in data and data["org_themen"] != alias:
            raise ValidationError(
                ["The iab_themen field must equal org_themen when both are given."],
                "iab_themen",
            )
        data["org_themen"] = alias
        return data


class CreateMetadataSchema(MetadataSchema):
    """Form fields of an upload; parts the API does not know are ignored."""

    class Meta:
        unknown = EXCLUDE

    reihenfolge = Int32(load_default=0, metadata=about("reihenfolge"))
    freigabe = Flag(load_default=True, metadata=about("freigabe"))


class UpdateSchema(MetadataSchema):
    """A PATCH body: only the supplied fields change; anything else is an error."""

    READ_ONLY = ("id", "size", "mime_type", "original_name", "created_at", "updated_at")

    class Meta:
        unknown = EXCLUDE
        description = (
            "The metadata to change; only the fields sent change and null clears a nullable "
            "field. Strings are trimmed and an empty string becomes null; strings hold at most "
            "255 characters (beschreibung 5000). Unknown and read-only fields are 422."
        )

    @pre_load
    def reject_unknown(self, data: Any, **kwargs: Any) -> Any:
        if not isinstance(data, dict):
            raise ValidationError(["The request body must be a JSON object."], "body")
        errors = {}
        for key in data:
            if key in self.READ_ONLY:
                errors[key] = [f"The {key} field cannot be changed."]
            elif key not in self.fields:
                errors[key] = [f"The {key} field is not an updatable field."]
        if errors:
            raise ValidationError(errors)
        if not data:
            raise ValidationError(
                ["The request body must contain at least one updatable field."], "body"
            )
        return data


class ListQuerySchema(Schema):
    """Query parameters of the list endpoints; an empty value means the filter is off."""

    class Meta:
        unknown = EXCLUDE

    page = PageNumber(load_default=1, metadata=query_about("page"))
    path = PlainString(metadata=query_about("path"))
    aktiv_id = PlainString(metadata=query_about("aktiv_id"))
    since = Since(metadata=query_about("since"))
    freigabe = ReleaseFilter(metadata=query_about("freigabe"))
    reprotyp = PlainString(metadata=query_about("reprotyp"))
    cursor = Cursor(metadata=query_about("cursor"))

    @pre_load
    def drop_empty(self, data: Any, **kwargs: Any) -> dict[str, Any]:
        # An empty cursor is meaningful: keyset pagination from the first page.
        return {key: value for key, value in data.items() if value != "" or key == "cursor"}


class FileRecordSchema(Schema):
    """A record as clients see it; internal columns (owner, storage key) never appear."""

    id = fields.String(metadata={**about("id"), "format": "uuid"})
    aktiv_id = Text(metadata=about("aktiv_id"))
    original_name = fields.String(metadata=about("original_name"))
    path = Text(metadata=about("path"))
    mime_type = fields.String(metadata={**about("mime_type"), "enum": sorted(ALLOWED_MIME_TYPES)})
    size = fields.Integer(metadata=about("size"))
    reprotyp = Text(metadata=about("reprotyp"))
    titel = Text(metadata=about("titel"))
    beschreibung = Text(max_length=BESCHREIBUNG_MAX, metadata=about("beschreibung"))
    autoren = Text(metadata=about("autoren"))
    sachschlagwoerter = Text(metadata=about("sachschlagwoerter"))
    org_themen = Text(metadata=about("org_themen"))
    # Existing clients fill their edit forms from this name and send it back on every save.
    iab_themen = Text(
        attribute="org_themen",
        dump_only=True,
        metadata={
            "description": "The value of org_themen under the original service's name, kept "
            "for its clients.",
            "deprecated": True,
        },
    )
    sperrfrist = CalendarDate(allow_none=True, metadata=about("sperrfrist"))
    reihenfolge = fields.Integer(metadata=about("reihenfolge"))
    freigabe = fields.Boolean(metadata=about("freigabe"))
    erstellt_von = Text(metadata=about("erstellt_von"))
    freigegeben_von = Text(metadata=about("freigegeben_von"))
    created_at = Timestamp(metadata=about("created_at"))
    updated_at = Timestamp(metadata=about("updated_at"))
    version = fields.Integer(metadata=about("version"))
    creators = StoredList(fields.Nested(CreatorSchema), empty=None, metadata=about("creators"))
    related_identifiers = StoredList(
        fields.Nested(RelatedIdentifierSchema), empty=[], metadata=about("related_identifiers")
    )
    series = SeriesPlace(metadata=about("series"))


record_schema = FileRecordSchema()
created_record_schema = FileRecordSchema(exclude=("updated_at",))
public_record_schema = FileRecordSchema(exclude=("erstellt_von", "freigegeben_von"))


class CreatedFilesSchema(Schema):
    """The answer of an upload: one record per file, in upload order."""

    files = fields.List(
        fields.Nested(created_record_schema),
        required=True,
        metadata={"minItems": 1, "maxItems": "{max_files}"},
    )


class _UploadedFiles(Schema):
    files = fields.List(
        Upload(),
        data_key="files[]",
        required=True,
        metadata={
            "minItems": 1,
            "maxItems": "{max_files}",
            "description": "1 to {max_files} files of 1 to {max_file_size:,} bytes each, of the "
            "allowed types. Parts named `files` or `files[N]` count too.",
        },
    )


class FileUploadFormSchema(CreateMetadataSchema, _UploadedFiles):
    """The body of an upload as the OpenAPI document shows it: the files first (the fields of
    the bases in reverse order), then the metadata of `CreateMetadataSchema`."""

    class Meta(CreateMetadataSchema.Meta):
        description = (
            "The files and the metadata that applies to every one of them. Strings are trimmed "
            "and an empty string means null; unknown form fields are ignored. The type of each "
            "file is detected from its bytes."
        )


class FileUpdateResultSchema(FileRecordSchema):
    """A PATCH answer (`dump_update_result`), as the OpenAPI document shows it."""

    class Meta:
        exclude = ("original_name", "mime_type", "size", "created_at", "version")
        description = "The record's id, the fields that were sent, and the new updated_at."

    id = fields.String(required=True, metadata={**about("id"), "format": "uuid"})
    updated_at = Timestamp(required=True, metadata=about("updated_at"))


def dump_update_result(record: Any, changed: list[str]) -> dict[str, Any]:
    """PATCH answers with the id, the fields that were sent and the new updated_at."""
    full = record_schema.dump(record)
    if "org_themen" in changed:
        changed = [*changed, "iab_themen"]  # both names, as in every record answer
    if {"autoren", "creators"} & set(changed):  # kept in step: each may change the other
        changed = list(dict.fromkeys([*changed, "autoren", "creators"]))
    return {
        "id": full["id"],
        **{name: full[name] for name in changed},
        "updated_at": full["updated_at"],
    }


#: The longest change note, in characters.
CHANGE_NOTE_MAX = 5000


class ReplaceFormSchema(Schema):
    """The form fields beside the file of a content replacement; others are ignored."""

    class Meta:
        unknown = EXCLUDE

    change_note = Text(
        max_length=CHANGE_NOTE_MAX,
        metadata={
            "description": "Why the content changes (optional, at most 5000 characters); "
            "kept with the version this replacement ends."
        },
    )


class ContentReplaceFormSchema(ReplaceFormSchema):
    """The body of a content replacement as the OpenAPI document shows it."""

    file = Upload(
        required=True,
        metadata={
            "description": "The new content: 1 to {max_file_size:,} bytes of an allowed type."
        },
    )


class FileVersionSchema(Schema):
    """A version a replacement ended, as its owner and administrators see it."""

    number = fields.Integer(metadata={"description": "The version number (1, 2, ...)."})
    sha256 = fields.String(
        attribute="checksum_sha256",
        metadata={"description": "SHA-256 of the version's content, lowercase hex."},
    )
    size = fields.Integer(metadata={"description": "Size of the version's content in bytes."})
    mime_type = fields.String(metadata={"description": "Detected type of the content."})
    original_name = fields.String(metadata={"description": "The file name it was uploaded as."})
    replaced_at = Timestamp(metadata={"description": "When the replacement ended it (UTC)."})
    replaced_by = fields.Integer(
        allow_none=True,
        metadata={"description": "The id of the account that replaced it (null: an operator)."},
    )
    change_note = Text(
        max_length=CHANGE_NOTE_MAX,
        metadata={"description": "The note sent with the replacement that ended it, or null."},
    )
    kept = fields.Boolean(
        metadata={
            "description": "Whether its content is kept (KEEP_RELEASED_VERSIONS, and it was "
            "public at some moment) and can be downloaded at /versions/{number}/download."
        }
    )


file_version_schema = FileVersionSchema()
