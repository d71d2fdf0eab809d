"""A fake DataCite REST API (`/dois`) on a free loopback port, for tests without the network.

It keeps DataCite's rules as its server (datacite/lupo) has them: Basic auth (401), DOIs only
under the repository's prefix (403, as DataCite's permission check answers) and in DataCite's
DOI syntax (422), the state machine draft -> registered (`register`) or findable (`publish`),
findable -> registered (`hide`), registered -> findable (`publish`), no way back to draft and
an event that does not apply ignored (DataCite's transitions do not complain); a `url` to leave
draft (422 "Can't be blank"); DELETE only of a draft (else 405); PUT of an unknown DOI creates
it (201). Every payload is checked against the `datacite` package's 4.5 JSON schema, merged
with what the DOI holds already (a draft may lack the required properties, as at DataCite);
refusals are DataCite's `{"errors": [{"source", "uid", "title"}]}` with 422.

Switches for tests: `fail_next(n, status)`, `down()` (connections refused) or
`down(refuse=False)` (503 to everything), `up()`, `slow(seconds)` (a request takes effect, its
answer comes that late: as when DataCite is slower than the client's patience). `requests`
records every request (method, path, parsed body, headers, the status answered); `dois` holds
what DataCite holds (attributes with `state`), by lower-case DOI.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from datacite import schema45
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

MEDIA_TYPE = "application/vnd.api+json"
#: DataCite's DOI syntax on create (lupo's `validates_format_of :doi`).
DOI_SYNTAX = re.compile(r"10\.\d{4,5}/[-._;()/:a-zA-Z0-9*~$=]+")
URL_SYNTAX = re.compile(r"(ftp|http|https)://\S+")
#: What the REST API derives and the package's schema does not describe.
REST_ONLY = ("identifiers", "state", "xml", "prefix", "suffix", "event")
REST_ONLY_TYPES = ("schemaOrg", "bibtex", "citeproc", "ris")
TRANSITIONS = {
    ("draft", "register"): "registered",
    ("draft", "publish"): "findable",
    ("registered", "publish"): "findable",
    ("findable", "hide"): "registered",
}
TITLES = {
    400: "You need to provide a payload following the JSONAPI spec",
    401: "Bad credentials.",
    403: "You are not authorized to access this resource.",
    404: "The resource you are looking for doesn't exist.",
    405: "Method not allowed",
    429: "Too many requests",
    500: "Internal server error",
    502: "Bad gateway",
    503: "The service is unavailable.",
}


@dataclass
class Recorded:
    """One request as the fake received it."""

    method: str
    path: str
    body: Any
    headers: dict[str, str]
    status: int = 0

    @property
    def attributes(self) -> dict[str, Any]:
        return ((self.body or {}).get("data") or {}).get("attributes") or {}


@dataclass
class _Switches:
    failures: list[int] = field(default_factory=list)
    unavailable: bool = False
    delay: float = 0.0


class _QuietHandler(WSGIRequestHandler):
    def log(self, type: str, message: str, *args: Any) -> None:
        return None


def errors(status: int, *entries: tuple[str | None, str], uid: str | None = None) -> Response:
    """DataCite's error answer: validation errors with `source`, others with `status`."""
    if entries:
        listed = [
            {k: v for k, v in {"source": source, "uid": uid, "title": title}.items() if v}
            for source, title in entries
        ]
    else:
        listed = [{"status": str(status), "title": TITLES.get(status, "Error")}]
    return Response(json.dumps({"errors": listed}), status, content_type=MEDIA_TYPE)


def schema_problems(attributes: dict[str, Any], complete: bool) -> list[tuple[str, str]]:
    """(source, title) of each schema error; a draft (`complete` False) may lack required
    properties."""
    shaped = {k: v for k, v in attributes.items() if k not in REST_ONLY}
    if isinstance(shaped.get("types"), dict):
        shaped["types"] = {k: v for k, v in shaped["types"].items() if k not in REST_ONLY_TYPES}
    found = []
    for error in schema45.validator.iter_errors(shaped):
        if not complete and error.validator == "required" and not error.absolute_path:
            continue
        source = str(error.absolute_path[0]) if error.absolute_path else "attributes"
        found.append((source, error.message[:300]))
    return found


class FakeDataCite:
    """The fake; `start()` (or `with`) serves it at `url`, `stop()` ends it."""

    def __init__(
        self,
        repository: str = "TEST.REPOSITORY",
        password: str = "test-password",
        prefix: str = "10.80001",
    ) -> None:
        self.repository, self.password, self.prefix = repository, password, prefix
        self.dois: dict[str, dict[str, Any]] = {}
        self.requests: list[Recorded] = []
        self._switches = _Switches()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._server: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- serving ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeDataCite:
        self._wake.clear()
        server = make_server(
            "127.0.0.1", self.port, self._app, threaded=True, request_handler=_QuietHandler
        )
        self.port = server.server_port
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._wake.set()  # a slow answer stops waiting
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeDataCite:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- switches -----------------------------------------------------------------------------

    def fail_next(self, n: int = 1, status: int = 503) -> None:
        """Answer the next `n` requests with `status` (DataCite's error body), doing nothing."""
        with self._lock:
            self._switches.failures.extend([status] * n)

    def down(self, refuse: bool = True) -> None:
        """DataCite gone: connections refused (the port closed), or every answer 503."""
        if refuse:
            self.stop()
        else:
            self._switches.unavailable = True

    def up(self) -> None:
        self._switches.unavailable = False
        if self._server is None:
            self.start()

    def slow(self, seconds: float) -> None:
        """Each answer `seconds` late (0: on time again); the request still takes effect."""
        self._switches.delay = seconds

    def sent(self, method: str | None = None) -> list[Recorded]:
        """The recorded requests, of one method if given."""
        return [r for r in self.requests if method is None or r.method == method]

    # -- the API ------------------------------------------------------------------------------

    def _app(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        raw = request.get_data()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        recorded = Recorded(request.method, request.path, body, dict(request.headers))
        with self._lock:
            self.requests.append(recorded)
            failure = self._switches.failures.pop(0) if self._switches.failures else None
            if failure is not None:
                response = errors(failure)
                if 300 <= failure < 400:  # a moved API: followed, it would be recorded too
                    response.headers["Location"] = f"{self.url}/moved{request.path}"
            elif self._switches.unavailable:
                response = errors(503)
            else:
                response = self._answer(request, body)
        recorded.status = response.status_code
        if self._switches.delay:
            self._wake.wait(self._switches.delay)
        return response(environ, start_response)

    def _authorised(self, request: Request) -> bool:
        header = request.headers.get("Authorization", "")
        expected = f"{self.repository}:{self.password}".encode()
        return header == "Basic " + base64.b64encode(expected).decode("ascii")

    def _answer(self, request: Request, body: Any) -> Response:
        if not self._authorised(request):
            return errors(401)
        path = request.path
        if path == "/dois" and request.method == "POST":
            return self._write(None, body)
        if not path.startswith("/dois/") or len(path) == len("/dois/"):
            return errors(404)
        doi = urllib.parse.unquote(path[len("/dois/") :]).lower()
        if request.method == "GET":
            return self._show(doi, 200) if doi in self.dois else errors(404)
        if request.method == "PUT":
            return self._write(doi, body)
        if request.method == "DELETE":
            held = self.dois.get(doi)
            if held is None:
                return errors(404)
            if held["state"] != "draft":
                answer = errors(405)
                answer.headers["Allow"] = "HEAD, GET, POST, PATCH, PUT, OPTIONS"
                return answer
            del self.dois[doi]
            return Response(status=204)
        return errors(405)

    def _write(self, doi: str | None, body: Any) -> Response:
        try:
            given = dict(body["data"]["attributes"])
        except (TypeError, KeyError, ValueError):
            return errors(400)
        if doi is None:  # POST: the DOI is in the body, and must be new
            named = given.get("doi") or (
                f"{given['prefix']}/{given['suffix']}" if given.get("suffix") else None
            )
            if not isinstance(named, str) or not named:
                return errors(422, ("doi", "Can't be blank"))
            doi = named.lower()
            if doi in self.dois:
                return errors(422, ("doi", "This DOI has already been taken"), uid=doi)
        held = self.dois.get(doi)
        if held is None:
            if not DOI_SYNTAX.fullmatch(doi):
                return errors(422, ("doi", "Is invalid"), uid=doi)
            if doi.partition("/")[0] != self.prefix:
                return errors(403)
        state = held["state"] if held else "draft"
        event = given.pop("event", None)
        new_state = TRANSITIONS.get((state, event), state) if event else state
        merged = {**(held or {}), **{k: v for k, v in given.items() if k not in REST_ONLY}}
        merged["doi"] = doi
        problems: list[tuple[str, str]] = []
        url = merged.get("url")
        if new_state != "draft" and not url:
            problems.append(("url", "Can't be blank"))
        if url and not (isinstance(url, str) and URL_SYNTAX.match(url)):
            problems.append(("url", "URL is not valid"))
        problems += schema_problems(merged, complete=new_state != "draft")
        if problems:
            return errors(422, *problems, uid=doi)
        merged["state"] = new_state
        self.dois[doi] = merged
        return self._show(doi, 200 if held else 201)

    def _show(self, doi: str, status: int) -> Response:
        prefix, _, suffix = doi.partition("/")
        attributes = {**self.dois[doi], "doi": doi, "prefix": prefix, "suffix": suffix}
        data = {"data": {"id": doi, "type": "dois", "attributes": attributes}}
        return Response(json.dumps(data), status, content_type=MEDIA_TYPE)


@pytest.fixture
def datacite_server() -> Iterator[FakeDataCite]:
    """A fake DataCite for one test (repository TEST.REPOSITORY, password test-password,
    prefix 10.80001)."""
    with FakeDataCite() as fake:
        yield fake
