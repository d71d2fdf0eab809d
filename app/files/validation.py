"""Every validation error of an upload, gathered in one place before one 422.

`POST /api/files`, `POST /api/files/{id}/content` and the tus uploads check up to three things:
the file parts (how many, and what each one's streaming found: type, size), the text fields that
could not be decoded, and the metadata schema (not for a content replace). They are merged here,
once, in that order (the summary message names the first error); for one field the first source
wins. `app.errors` turns the result into the 422 answer. (The bulk import reports rejected files
in its own words and checks the same rules itself.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from marshmallow import Schema

from app.exceptions import ValidationFailed
from app.files.uploads import StagedFile
from app.http import validate


def file_errors(files: Sequence[StagedFile], *, field: str, max_files: int) -> dict[str, list[str]]:
    """How many file parts came, and what was wrong with each (under its own key)."""
    errors: dict[str, list[str]] = {}
    if not files:
        errors[field] = [f"The {field} field is required."]
    elif len(files) > max_files:
        errors[field] = [
            f"The {field} field must not have more than {max_files} items."
            if max_files > 1
            else f"The {field} field must be a single file."
        ]
    for staged in files[:max_files]:
        if staged.error:
            errors.setdefault(staged.field, []).append(staged.error)
    return errors


def validated(
    schema: Schema | None,
    fields: Mapping[str, str],
    *,
    unreadable: Mapping[str, list[str]] | None = None,
    files: Sequence[StagedFile] | None = None,
    file_field: str = "files",
    max_files: int = 1,
) -> dict[str, Any]:
    """The loaded metadata, or `ValidationFailed` with every error at once.

    `unreadable` are text fields whose bytes were not UTF-8: for those the decoding error is
    reported, not what the schema says of the missing value. `files` None means the request
    carries no file parts to check (the creation of a tus upload).
    """
    errors = {} if files is None else file_errors(files, field=file_field, max_files=max_files)
    metadata: dict[str, Any] = {}
    schema_errors: dict[str, list[str]] = {}
    if schema is not None:
        metadata, schema_errors = validate(schema, dict(fields))
    for source in (unreadable or {}, schema_errors):
        for key, messages in source.items():
            errors.setdefault(key, list(messages))
    if errors:
        raise ValidationFailed(errors)
    return metadata
