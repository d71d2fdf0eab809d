"""Domain errors raised by the services. Each names its HTTP status (and any headers) here, and
`app.errors` has one handler that answers all of them in the one JSON shape."""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    """Base of the errors the service functions raise on purpose; by default the client sent
    something that cannot be processed at all (400), e.g. a broken body."""

    status = 400
    headers: dict[str, str] = {}

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def body(self) -> dict[str, object]:
        return {"message": self.message}


class RecordNotFound(DomainError):
    """The record does not exist or the caller may not know that it does."""

    status = 404

    def __init__(self, message: str = "Not found.") -> None:
        super().__init__(message)


class DownloadBlocked(DomainError):
    """The record is visible, but its content may not be handed out to this caller yet."""

    status = 403


class AdministratorsOnly(DomainError):
    """Only administrators may do this; the caller is authenticated but not one."""

    status = 403


class RecordChanged(DomainError):
    """The client's If-Match names a state of the record that is no longer current."""

    status = 412

    def __init__(self) -> None:
        super().__init__(
            "The record has changed since you read it (If-Match does not match its ETag); "
            "read it again."
        )


class ValidationFailed(DomainError):
    """Input broke a rule; `errors` maps each field key to its messages."""

    status = 422

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        super().__init__(summary_message(errors))

    def body(self) -> dict[str, object]:
        return {"message": self.message, "errors": self.errors}


def summary_message(errors: dict[str, list[str]]) -> str:
    """Laravel's summary: the first message and how many more there are."""
    messages = [m for field_messages in errors.values() for m in field_messages]
    if not messages:
        return "The given data was invalid."
    extra = len(messages) - 1
    if extra == 0:
        return messages[0]
    noun = "error" if extra == 1 else "errors"
    return f"{messages[0]} (and {extra} more {noun})"


class NotAuthenticated(DomainError):
    """No valid bearer token came with the request."""

    status = 401
    headers = {"WWW-Authenticate": "Bearer"}

    def __init__(self) -> None:
        super().__init__("Unauthenticated.")


class RecordWithdrawn(DomainError):
    """The record had a DOI and left public view (deleted, or no longer released): its
    addresses answer that it is gone for good, never that it was never there."""

    status = 410

    def __init__(self, message: str = "Gone: this record was withdrawn.", doi: Any = None) -> None:
        super().__init__(message)
        #: The withdrawn record's DOI row (app.models.Doi), for a page to show its tombstone.
        self.doi = doi
