"""What a DOI looks like in API answers: the two fields of an owner's record answers with DOIs
configured (`DATACITE_*`; absent otherwise), and a reservation's answer."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from app.doi.services import DRAFT, FINDABLE, REGISTERED

DOI = (
    "With DOIs configured only: the record's DOI (lower case, `prefix/xxxx-xxxx`), null "
    "without one."
)
STATE = (
    "With DOIs configured only: what DataCite holds (or will in a moment: the outbox sends it "
    "after the commit): draft before the record is public, findable while it is, registered "
    "(hidden) once it left public view; null without a DOI."
)
EXAMPLES = ["10.5072/3kq7-m2x0"]


class DoiFieldsSchema(Schema):
    """What `app.files.routes.with_dois` adds to an owner's record answers."""

    doi = fields.String(allow_none=True, metadata={"description": DOI, "examples": EXAMPLES})
    doi_state = fields.String(
        allow_none=True,
        validate=validate.OneOf([DRAFT, REGISTERED, FINDABLE]),
        metadata={"description": STATE},
    )


class ReservedDoiSchema(Schema):
    class Meta:
        description = "A DOI reserved for a record."

    doi = fields.String(required=True, metadata={"description": DOI, "examples": EXAMPLES})
    doi_state = fields.String(
        required=True,
        validate=validate.OneOf([DRAFT, FINDABLE]),
        metadata={"description": STATE},
    )
