"""The body of `POST /api/tokens` and of its answer."""

from __future__ import annotations

from typing import Any

from marshmallow import (
    EXCLUDE,
    Schema,
    ValidationError,
    fields,
    validates_schema,
)

from app.schemas.about import about
from app.schemas.field_types import STRING_MAX, PlainString, Secret


def _required_string(name: str, kind: type[fields.String] = PlainString) -> fields.String:
    required = f"The {name} field is required."
    return kind(
        required=True,
        error_messages={
            "required": required,
            "null": required,
            "invalid": f"The {name} field must be a string.",
        },
        metadata=about(name),
    )


class TokenRequestSchema(Schema):
    class Meta:
        unknown = EXCLUDE

    email = _required_string("email")
    password = _required_string("password", Secret)
    token_name = _required_string("token_name")

    @validates_schema
    def non_empty(self, data: dict[str, Any], **kwargs: Any) -> None:
        errors = {
            name: [f"The {name} field is required."]
            for name in ("email", "password", "token_name")
            if name in data and not data[name].strip()
        }
        if "token_name" in data and len(data["token_name"]) > STRING_MAX:
            errors.setdefault("token_name", []).append(
                f"The token_name field must not be greater than {STRING_MAX} characters."
            )
        if errors:
            raise ValidationError(errors)


class TokenSchema(Schema):
    """The answer of `POST /api/tokens`."""

    token = fields.String(
        required=True,
        metadata={
            "pattern": r"^[0-9]+\|[A-Za-z0-9_-]{43,}$",
            "description": "`<id>|<secret>`; shown only this once.",
        },
    )
