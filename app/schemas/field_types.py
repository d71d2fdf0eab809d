"""The service's field types: the validation rules of single values, in Laravel's wording.

A type's `openapi` is how the OpenAPI document shows its values (app/docs/openapi.py; `type`
and `format` as apispec takes them, and the rest of what it checks that a schema can say).
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any, ClassVar

from marshmallow import (
    ValidationError,
    fields,
)

from app.schemas.cursor import decode_cursor

STRING_MAX = 255
BESCHREIBUNG_MAX = 5000
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

PATH_SEGMENT = re.compile(r"[A-Za-z0-9._-]+")
DATE_FORM = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
SINCE_FORM = re.compile(
    r"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})"
    r"(?:T(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2})"
    r"(?::(?P<second>[0-9]{2})(?:\.(?P<fraction>[0-9]{1,6}))?)?)?"
    r"(?P<offset>Z|[+\- ][0-9]{2}:?[0-9]{2})?"
)
# The canonical form of a stored path (input is trimmed first; an empty string means null).
PATH_PATTERN = r"^(?!(?:.*/)?\.\.(?:/|$))(?:[A-Za-z0-9._-]+(?:/[A-Za-z0-9._-]+)*)?$"
# Calendar validity (no 30 February) is beyond a pattern; such dates answer 422.
SINCE_PATTERN = (
    r"^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    r"(?:T(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:\.[0-9]{1,6})?)?)?"
    r"(?:Z|[+ -](?:[01][0-9]|2[0-3]):?[0-5][0-9])?$"
)
TRUE_VALUES = {"1", "true"}
FALSE_VALUES = {"0", "false"}


def _label(field: fields.Field) -> str:
    return field.data_key or field.name or "value"


# Characters XML 1.0 cannot carry (C0 controls but tab, LF and CR; U+FFFE, U+FFFF) and the
# other Unicode noncharacters: one such character in a title would break every feed and
# OAI-PMH answer that shows the record.
NOT_TEXT = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\ufdd0-\ufdef"
    + "".join(
        f"{chr(plane * 0x10000 + 0xFFFE)}{chr(plane * 0x10000 + 0xFFFF)}" for plane in range(17)
    )
    + "]"
)


def storable_text(value: str, label: str) -> str:
    """Text every output can carry: valid Unicode (no lone surrogates from JSON escapes), and
    none of the characters XML 1.0 cannot carry or Unicode reserves as noncharacters."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(f"The {label} field must be valid Unicode text.") from None
    found = NOT_TEXT.search(value)
    if found:
        code = f"U+{ord(found.group()):04X}"
        raise ValidationError(
            f"The {label} field must not contain the character {code} (control characters "
            "other than tab and line breaks, and Unicode noncharacters, are not text)."
        )
    return value


class PlainString(fields.String):
    """A string as given (query values, credentials), refused if no database could keep it."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        return storable_text(text, _label(self))


class Secret(fields.String):
    """A password as given: valid Unicode without NUL, as before the stricter text rule. It is
    only ever hashed, never stored as text or shown, so the other characters no output can
    carry are no concern of it (an operator may have set such a password)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ValidationError(f"The {_label(self)} field must be valid Unicode text.") from None
        if "\x00" in text:
            raise ValidationError(f"The {_label(self)} field must not contain NUL characters.")
        return text


class Text(fields.Field):
    """Free text: trimmed, an empty string becomes null, length counted in characters."""

    openapi: ClassVar[dict[str, Any]] = {"type": "string"}  # and its `maxLength`

    def __init__(self, max_length: int = STRING_MAX, **kwargs: Any) -> None:
        kwargs.setdefault("allow_none", True)
        super().__init__(**kwargs)
        self.max_length = max_length

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str | None:
        if not isinstance(value, str):
            raise ValidationError(f"The {_label(self)} field must be a string.")
        value = storable_text(value, _label(self)).strip()
        if not value:
            return None
        if len(value) > self.max_length:
            raise ValidationError(
                f"The {_label(self)} field must not be greater than {self.max_length} characters."
            )
        return value

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return value


class VirtualPath(Text):
    """A label of slash-separated segments; it never decides where content is stored."""

    openapi: ClassVar[dict[str, Any]] = {"type": "string", "pattern": PATH_PATTERN}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str | None:
        text = super()._deserialize(value, attr, data, **kwargs)
        if text is None:
            return None
        segments = text.split("/")
        if any(not PATH_SEGMENT.fullmatch(s) or s == ".." for s in segments):
            raise ValidationError(
                "The path field format is invalid: use letters, digits, '.', '_' and '-' in "
                "segments separated by single slashes, with no leading or trailing slash "
                "and no '..' segment."
            )
        return text


class Flag(fields.Field):
    """true/false, 1/0, "1"/"0", "true"/"false"; nothing else."""

    openapi: ClassVar[dict[str, Any]] = {
        "anyOf": [
            {"type": "boolean"},
            {"type": "integer", "enum": [0, 1]},
            {"type": "string", "pattern": r"^(?:[01]|[Tt][Rr][Uu][Ee]|[Ff][Aa][Ll][Ss][Ee])$"},
        ]
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error_messages["null"] = "The {name} field must be true or false."

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str):
            lowered = value.lower()
            if lowered in TRUE_VALUES:
                return True
            if lowered in FALSE_VALUES:
                return False
        raise ValidationError(f"The {_label(self)} field must be true or false.")

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return value

    def make_error(self, key: str, **kwargs: Any) -> ValidationError:
        kwargs.setdefault("name", _label(self))
        return super().make_error(key, **kwargs)


class Int32(fields.Field):
    """A whole number in the signed 32-bit range; form fields send its decimal string."""

    openapi: ClassVar[dict[str, Any]] = {
        "type": "integer",
        "format": "int32",
        "minimum": INT32_MIN,
        "maximum": INT32_MAX,
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error_messages["null"] = "The {name} field must be an integer."

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        if isinstance(value, bool):
            raise ValidationError(f"The {_label(self)} field must be an integer.")
        if isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]{1,20}", value.strip()):
            value = int(value.strip())
        if not isinstance(value, int):
            raise ValidationError(f"The {_label(self)} field must be an integer.")
        if not INT32_MIN <= value <= INT32_MAX:
            raise ValidationError(
                f"The {_label(self)} field must be between {INT32_MIN} and {INT32_MAX}."
            )
        return value

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return value

    def make_error(self, key: str, **kwargs: Any) -> ValidationError:
        kwargs.setdefault("name", _label(self))
        return super().make_error(key, **kwargs)


class CalendarDate(fields.Field):
    """A real date written YYYY-MM-DD."""

    openapi: ClassVar[dict[str, Any]] = {"type": "string", "format": "date"}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> date | None:
        if isinstance(value, str):
            value = value.strip()
            if not value:
                return None
            if DATE_FORM.fullmatch(value):
                try:
                    return date.fromisoformat(value)
                except ValueError:
                    pass
        raise ValidationError(
            f"The {_label(self)} field must be a valid date in the format YYYY-MM-DD."
        )

    def _serialize(self, value: date | None, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return None if value is None else value.isoformat()


def format_timestamp(value: datetime) -> str:
    """An instant as the API writes it: UTC with six fractional digits and a Z, as the original
    service wrote them (`2026-11-26T10:00:00.000000Z`). The one writer of that format: the
    schemas' `Timestamp`, the list pages' fast dump, the audit trail (its hashes cover it),
    share-link answers and messages, `flask users list --json`.

    Written by isoformat, several times faster than strftime and the same text (strftime
    would write a year before 1000 with fewer than four digits; the service writes no such
    instant: every one it shows is its own clock's)."""
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


class Timestamp(fields.Field):
    """An instant as the API writes it (`format_timestamp`)."""

    openapi: ClassVar[dict[str, Any]] = {
        "type": "string",
        "format": "date-time",
        "pattern": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$",
        "examples": ["2026-04-30T10:15:00.123456Z"],
    }

    def _serialize(self, value: datetime | None, attr: str | None, obj: Any, **kwargs: Any) -> Any:
        return None if value is None else format_timestamp(value)


def parse_since(value: str) -> datetime:
    """An instant from `YYYY-MM-DD[THH:MM[:SS[.ffffff]]][Z|±HH:MM|±HHMM]`; no offset is UTC.

    A space where the offset sign belongs is read as `+`: it is what an unencoded plus sign
    in a query string turns into.
    """
    match = SINCE_FORM.fullmatch(value.strip("\t\n\r"))
    if not match:
        raise ValueError(value)
    day = date.fromisoformat(match["date"])
    fraction = (match["fraction"] or "").ljust(6, "0")
    offset = match["offset"]
    tz = UTC
    if offset and offset != "Z":
        sign = -1 if offset[0] == "-" else 1
        digits = offset[1:].replace(":", "")
        hours, minutes = int(digits[:2]), int(digits[2:])
        if hours > 23 or minutes > 59:
            raise ValueError(value)
        tz = timezone(sign * timedelta(hours=hours, minutes=minutes))
    try:
        return _instant(match, day, fraction, tz)
    except OverflowError:  # 0001-01-01T00:00+01:00 is before the first representable instant
        raise ValueError(value) from None


def _instant(match: re.Match[str], day: date, fraction: str, tz: timezone) -> datetime:
    return datetime(
        day.year,
        day.month,
        day.day,
        int(match["hour"] or 0),
        int(match["minute"] or 0),
        int(match["second"] or 0),
        int(fraction or 0),
        tzinfo=tz,
    ).astimezone(UTC)


class Since(fields.Field):
    openapi: ClassVar[dict[str, Any]] = {
        "type": "string",
        "pattern": SINCE_PATTERN,
        "examples": ["2026-04-30", "2026-04-30T10:15:00Z"],
    }

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> datetime:
        try:
            return parse_since(str(value))
        except ValueError:
            raise ValidationError(
                "The since field must be an ISO 8601 date or timestamp, e.g. "
                "2026-04-30 or 2026-04-30T10:15:00Z."
            ) from None


class PageNumber(fields.Field):
    openapi: ClassVar[dict[str, Any]] = {"type": "integer", "minimum": 1, "maximum": 999_999_999}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        if isinstance(value, str) and re.fullmatch(r"[0-9]{1,9}", value) and int(value) >= 1:
            return int(value)
        raise ValidationError("The page field must be a whole number of at least 1.")


class Cursor(fields.Field):
    """Keyset pagination: empty for the first page, else a `next_cursor` from a list answer."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        if value == "":
            return None
        try:
            return decode_cursor(str(value))
        except (ValueError, UnicodeError):
            raise ValidationError(
                "The cursor field must be a next_cursor value from a list answer."
            ) from None


class Upload(fields.Field):
    """A file part of a multipart body, for the OpenAPI document only: multipart bodies are
    streamed (app/files/uploads.py), never loaded by a schema."""

    openapi: ClassVar[dict[str, Any]] = {
        "type": "string",
        "format": "binary",
        "contentMediaType": "application/octet-stream",
    }


class ReleaseFilter(fields.Field):
    openapi: ClassVar[dict[str, Any]] = {"type": "string", "enum": ["0", "1"]}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if value in ("0", "1"):
            return value == "1"
        raise ValidationError("The freigabe field must be 0 or 1.")
