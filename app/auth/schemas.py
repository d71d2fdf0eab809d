"""The body of `POST /api/tokens` and of its answer, and the rules of an account's email,
name and password, which every operator command that sets them loads through (`AccountSchema`,
app/auth/cli.py): one rule, stated in the README's "Operator commands"."""

from __future__ import annotations

from typing import Any

from marshmallow import (
    EXCLUDE,
    Schema,
    ValidationError,
    fields,
    pre_load,
    validate,
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


#: The shortest password an account may be given (NIST SP 800-63B's minimum).
PASSWORD_MIN = 8


class AccountSchema(Schema):
    """An account's email, name and password as `create-user`, `provision-admin` and
    `users set-password` accept them (load with `partial=True` for a part of them).

    - email: an address such as `name@example.org` (marshmallow's `Email`), at most 255
      characters, surrounding whitespace dropped; stored lower-cased (unique regardless of case);
    - name: not blank, at most 255 characters;
    - password: at least `PASSWORD_MIN` characters, not only whitespace, no NUL.
    """

    class Meta:
        unknown = EXCLUDE

    email = PlainString(
        required=True,
        validate=[
            validate.Length(
                max=STRING_MAX,
                error=f"The email must not be longer than {STRING_MAX} characters.",
            ),
            validate.Email(error="The email must be an address such as name@example.org."),
        ],
    )
    name = PlainString(
        required=True,
        validate=validate.Length(
            max=STRING_MAX, error=f"The name must not be longer than {STRING_MAX} characters."
        ),
    )
    password = Secret(
        required=True,
        validate=validate.Length(
            min=PASSWORD_MIN,
            error=f"The password must be at least {PASSWORD_MIN} characters long.",
        ),
    )

    @pre_load
    def strip(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {
            name: value.strip() if name in ("email", "name") and isinstance(value, str) else value
            for name, value in data.items()
        }

    @validates_schema
    def not_blank(self, data: dict[str, Any], **kwargs: Any) -> None:
        errors = {
            name: [f"The {name} must not be empty."]
            for name in ("email", "name", "password")
            if name in data and not data[name].strip()
        }
        if errors:
            raise ValidationError(errors)

    def load_account(self, **given: str) -> dict[str, str]:
        """The given fields, checked; the email and the name without surrounding whitespace."""
        return self.load(given, partial=True)
