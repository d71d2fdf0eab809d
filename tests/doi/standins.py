"""Test-local stand-ins for app/doi/payload.py and app/doi/client.py while those are written
on another branch (doiclient): the same names and calls, kept here and used only when the
real modules are missing (tests/doi/conftest.py). The DataCite stand-in keeps DataCite's
state machine in memory: draft -> registered -> findable, hide back to registered, only
drafts deletable; `down()` makes every call fail at once, `fail_next(status, message)`
refuses the next call as DataCite does (422 with errors)."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import types
from typing import Any


class InvalidPayload(ValueError):
    pass


class DataCiteRejected(Exception):
    def __init__(self, status: int, messages: list[str]) -> None:
        super().__init__(f"{status}: {'; '.join(messages)}")
        self.status = status
        self.messages = messages


class DataCiteUnavailable(Exception):
    pass


def attributes(record: Any, doi: str, *, landing_url: str, publisher: str, available: Any) -> dict:
    found: dict[str, Any] = {
        "doi": doi,
        "url": landing_url,
        "titles": [{"title": record.titel or record.original_name}],
        "creators": [
            {"name": name.strip()} for name in (record.autoren or "").split(";") if name.strip()
        ]
        or [{"name": "(:unav)"}],
        "publisher": {"name": publisher},
        "publicationYear": record.created_at.year,
        "types": {"resourceTypeGeneral": "Text"},
        "version": str(record.version),
    }
    if available is not None:
        found["dates"] = [{"date": available.isoformat(), "dateType": "Available"}]
    return found


def validate(attrs: dict) -> None:
    if not attrs.get("titles") or not attrs.get("url"):
        raise InvalidPayload("titles and url are required")


def digest(attrs: dict) -> str:
    return hashlib.sha256(json.dumps(attrs, sort_keys=True, default=str).encode()).hexdigest()


class FakeDataCite:
    """DataCite in memory: `dois` (doi -> {"state", "attributes"}), `calls` (what was sent)."""

    def __init__(self) -> None:
        self.dois: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str, str | None]] = []
        self.lock = threading.Lock()
        self.is_down = False
        self.failures: list[tuple[int, str]] = []
        #: Set while a call waits (the test's "slow DataCite"); cleared lets it go on.
        self.gate: threading.Event | None = None

    def down(self) -> None:
        self.is_down = True

    def up(self) -> None:
        self.is_down = False

    def fail_next(self, status: int, message: str) -> None:
        self.failures.append((status, message))

    def _call(self, verb: str, doi: str, event: str | None = None) -> None:
        if self.gate is not None:
            self.gate.wait(timeout=30)
        if self.is_down:
            raise DataCiteUnavailable("DataCite is unavailable: connection refused")
        if self.failures:
            status, message = self.failures.pop(0)
            raise DataCiteRejected(status, [message])
        with self.lock:
            self.calls.append((verb, doi, event))

    def create_draft(self, doi: str, attrs: dict) -> None:
        self._call("create", doi)
        with self.lock:
            if doi in self.dois:
                raise DataCiteRejected(422, ["This DOI has already been taken"])
            self.dois[doi] = {"state": "draft", "attributes": attrs}

    def update(self, doi: str, attrs: dict, event: str | None) -> None:
        self._call("update", doi, event)
        with self.lock:
            held = self.dois.get(doi)
            if held is None:
                raise DataCiteRejected(404, ["The resource you are looking for doesn't exist."])
            held["attributes"] = attrs
            if event == "publish":
                held["state"] = "findable"
            elif event == "register" and held["state"] == "draft":
                held["state"] = "registered"
            elif event == "hide":
                held["state"] = "registered"

    def hide(self, doi: str) -> None:
        self._call("hide", doi)
        with self.lock:
            self.dois[doi]["state"] = "registered"

    def delete(self, doi: str) -> None:
        self._call("delete", doi)
        with self.lock:
            held = self.dois.get(doi)
            if held is not None and held["state"] != "draft":
                raise DataCiteRejected(405, ["Method not allowed: only drafts can be deleted"])
            self.dois.pop(doi, None)

    def get(self, doi: str) -> dict | None:
        return self.dois.get(doi)


def install() -> None:
    """Make `app.doi.payload` and `app.doi.client` importable if the real ones are missing."""
    try:
        import app.doi.payload  # noqa: F401
    except ImportError:
        module = types.ModuleType("app.doi.payload")
        module.attributes = attributes  # type: ignore[attr-defined]
        module.validate = validate  # type: ignore[attr-defined]
        module.digest = digest  # type: ignore[attr-defined]
        module.InvalidPayload = InvalidPayload  # type: ignore[attr-defined]
        sys.modules["app.doi.payload"] = module
