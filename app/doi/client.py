"""DataCite's REST API (`/dois`), the calls the DOI outbox makes: JSON:API bodies, Basic auth.

Two kinds of failure, because the outbox treats them differently: `DataCiteRejected` (a 4xx:
DataCite read the request and refused it, with its `errors[]`; sending it again unchanged will
not help) and `DataCiteUnavailable` (5xx, 429, a timeout, a refused or broken connection:
DataCite may be back later). urllib rather than requests: requests is installed only because
the `datacite` package requires it, and this module would have to declare it in
pyproject.toml to use it.
"""

from __future__ import annotations

import base64
import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

MEDIA_TYPE = "application/vnd.api+json"
#: The most of an answer read (DataCite's DOI answers carry the metadata twice, as JSON and as
#: base64 XML; far below this).
MAX_ANSWER = 8 * 1024 * 1024
#: Answers that say "later", though 4xx.
TRANSIENT = frozenset({408, 425, 429})


class DataCiteError(Exception):
    """A call to DataCite that did not do what it was asked."""


class DataCiteRejected(DataCiteError):
    """DataCite refused the request (4xx); `messages` are its `errors[]` as "source: title"."""

    def __init__(self, status: int, messages: list[str]) -> None:
        super().__init__(f"DataCite answered {status}: {'; '.join(messages)}")
        self.status = status
        self.messages = messages


class DataCiteUnavailable(DataCiteError):
    """DataCite did not answer usefully (5xx, 429, timeout, no connection): try again later."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer to report (a DATACITE_URL to correct), never to follow with the
    credentials and a body."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def error_messages(body: bytes, status: int, reason: str) -> list[str]:
    """DataCite's `errors[]` as "source: title" (or the title alone); the status line when the
    body holds none (a proxy's page, an empty answer)."""
    try:
        errors = json.loads(body.decode("utf-8")).get("errors")
    except (ValueError, AttributeError):
        errors = None
    if isinstance(errors, dict):  # DataCite answers a few errors as one object
        errors = [errors]
    messages = []
    for error in errors if isinstance(errors, list) else []:
        if not isinstance(error, dict):
            continue
        title = str(error.get("title") or error.get("detail") or "").strip()
        source = str(error.get("source") or "").strip()
        if title or source:
            messages.append(f"{source}: {title}" if source and title else title or source)
    return messages or [f"{status} {reason}".strip()]


class DataCite:
    """One DataCite repository account at `base_url` (https://api.datacite.org, or the test
    API https://api.test.datacite.org); `timeout` bounds each wait on the network, in
    seconds."""

    def __init__(
        self, base_url: str, repository: str, password: str, timeout: float = 10.0
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.repository = repository
        self.timeout = timeout
        token = base64.b64encode(f"{repository}:{password}".encode()).decode("ascii")
        self._authorization = f"Basic {token}"
        self._opener = urllib.request.build_opener(_NoRedirects())

    def __repr__(self) -> str:
        return f"DataCite({self.base_url!r}, {self.repository!r})"

    def create_draft(self, doi: str, attributes: dict[str, Any]) -> dict[str, Any]:
        """Create the DOI as a draft with these attributes; its attributes as DataCite holds
        them. A DOI that exists already as a draft is updated instead: an earlier try whose
        answer was lost (a timeout) created it."""
        body = {**attributes, "doi": doi}
        body.pop("event", None)
        try:
            return self._send("POST", "/dois", body)
        except DataCiteRejected as rejected:
            if rejected.status != 422 or not any("taken" in m for m in rejected.messages):
                raise
            existing = self.get(doi)
            if existing is None or existing.get("state") != "draft":
                raise
            return self.update(doi, attributes, None)

    def update(self, doi: str, attributes: dict[str, Any], event: str | None) -> dict[str, Any]:
        """Send the attributes, with DataCite's `event` ("publish": findable, "register":
        registered, "hide": from findable to registered) when given."""
        body = {key: value for key, value in attributes.items() if key != "event"}
        if event is not None:
            if event not in ("publish", "register", "hide"):
                raise ValueError(f"unknown DataCite event {event!r}")
            body["event"] = event
        return self._send("PUT", self._path(doi), body)

    def hide(self, doi: str) -> dict[str, Any]:
        """Make a findable DOI registered only: it resolves, but no search lists it."""
        return self._send("PUT", self._path(doi), {"event": "hide"})

    def delete(self, doi: str) -> None:
        """Delete a draft (DataCite deletes nothing else: 405 for a registered DOI). A DOI
        DataCite does not know is gone already."""
        try:
            self._send("DELETE", self._path(doi), None)
        except DataCiteRejected as rejected:
            if rejected.status != 404:
                raise

    def get(self, doi: str) -> dict[str, Any] | None:
        """The DOI's attributes (with its `state`) as DataCite holds them, None if unknown."""
        try:
            return self._send("GET", self._path(doi), None)
        except DataCiteRejected as rejected:
            if rejected.status == 404:
                return None
            raise

    def _path(self, doi: str) -> str:
        return "/dois/" + urllib.parse.quote(doi.lower(), safe="/")

    def _send(self, method: str, path: str, attributes: dict[str, Any] | None) -> dict[str, Any]:
        data = None
        headers = {"Accept": MEDIA_TYPE, "Authorization": self._authorization}
        if attributes is not None:
            body = {"data": {"type": "dois", "attributes": attributes}}
            data = json.dumps(body, ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = MEDIA_TYPE
        request = urllib.request.Request(
            self.base_url + path, data=data, headers=headers, method=method
        )
        where = f"{method} {self.base_url}{path}"
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                answer = response.read(MAX_ANSWER)
        except urllib.error.HTTPError as error:
            with error:
                status, reason = error.code, str(error.reason or "")
                body_read = _read_quietly(error)
                location = error.headers.get("Location") if error.headers else None
            if 300 <= status < 400:
                where_to = f" to {location}" if location else ""
                raise DataCiteRejected(
                    status, [f"redirected{where_to}: DATACITE_URL should name DataCite's API"]
                ) from None
            messages = error_messages(body_read, status, reason)
            if status >= 500 or status in TRANSIENT:
                raise DataCiteUnavailable(
                    f"{where}: DataCite answered {status}: {'; '.join(messages)}"
                ) from None
            raise DataCiteRejected(status, messages) from None
        except urllib.error.URLError as error:
            raise DataCiteUnavailable(f"{where}: {error.reason}") from None
        except (OSError, http.client.HTTPException) as error:  # timeouts, resets, bad answers
            raise DataCiteUnavailable(f"{where}: {error or type(error).__name__}") from None
        if not answer:
            return {}
        try:
            found = json.loads(answer.decode("utf-8"))
            attributes_found = found["data"]["attributes"]
        except (ValueError, KeyError, TypeError):
            raise DataCiteUnavailable(f"{where}: an answer that is not DataCite's JSON") from None
        if not isinstance(attributes_found, dict):
            raise DataCiteUnavailable(f"{where}: an answer without attributes")
        return attributes_found


def _read_quietly(error: urllib.error.HTTPError) -> bytes:
    """The body of an error answer, or nothing when the connection broke while reading it."""
    try:
        return error.read(MAX_ANSWER) or b""
    except (OSError, http.client.HTTPException):
        return b""
