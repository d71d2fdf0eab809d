"""One structured (JSON) log line per request, and a request id that travels with it.

The line is written when the response has been sent completely (or the client went away), so
it carries the real duration and byte count of streamed downloads. It is built from a fixed set
of fields: no header, query string, body or token can reach it, and a share link's secret is
cut out of the path.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.streaming import PumpedBody

access_log = logging.getLogger("app.access")

REQUEST_ID_ENVIRON = "app.request_id"
USER_ID_ENVIRON = "app.user_id"
#: The id of the share link a request presented (app/links), logged in place of its secret.
SHARE_LINK_ENVIRON = "app.share_link_id"
#: The status a proxy answers in the service's place (DOWNLOAD_OFFLOAD: the service answers 200
#: with `X-Accel-Redirect`, nginx the client's 206); logged as the status, with `offloaded`.
OFFLOADED_STATUS_ENVIRON = "app.offloaded_status"
_VALID_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class JSONFormatter(logging.Formatter):
    """Log records as single-line JSON objects; `extra={"fields": {...}}` adds fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        fields = getattr(record, "fields", None)
        if fields:
            entry.update(fields)
        else:
            entry["message"] = record.getMessage()
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: int = logging.INFO) -> None:
    """Send the app's logs to stderr as JSON once; leaves other handlers (pytest's) alone."""
    logger = logging.getLogger("app")
    if any(getattr(h, "_app_json", False) for h in logger.handlers):
        return
    handler = logging.StreamHandler()
    handler.setFormatter(JSONFormatter())
    handler._app_json = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level)


#: What could hold a share link's whole secret wherever it stands in a path: a run of at least
#: 43 of its URL-safe characters (app/links/services.py `SECRET_FORM`). A path holding a secret
#: holds such a run, whatever was put around it, so no path written to a log can show one.
_SECRET_LIKE = re.compile(r"[A-Za-z0-9_-]{43,}")
#: What a secret-like run elsewhere in a path is written as.
SECRET_PLACEHOLDER = "[redacted]"


@dataclass(frozen=True, slots=True)
class SecretPaths:
    """The addresses that carry a share link's secret: the segment after one of `prefixes`
    (segments, lower case; `secret_paths` makes them)."""

    prefixes: tuple[tuple[str, ...], ...]


def secret_paths(prefixes: Iterable[str]) -> SecretPaths:
    """The addresses that carry a share link's secret: a path segment after one of `prefixes`
    (the factory hands those of app/links/holder.py)."""
    return SecretPaths(
        tuple(tuple(part.lower() for part in p.split("/") if part) for p in prefixes)
    )


def redacted_path(path: str, link_id: str | None, secrets: SecretPaths) -> str:
    """`path` without a share link's secret (`secrets`: where one is): the link's id when the
    request found the link, else a fixed placeholder (a secret that found nothing is still a
    secret, or a typo of one).

    The segment after a prefix is found as a server or a client may read the path: repeated
    slashes, `.` and `..` segments and the prefix's case do not hide it (`/api//shared/S`,
    `/api/./shared/S`, `/S/S`). Any other run of characters that could be a whole secret is
    cut out too (`SECRET_PLACEHOLDER`), wherever it stands."""
    canonical: list[str] = []
    written: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            written.append(segment)
            continue
        if segment == "..":
            if canonical:
                canonical.pop()
            written.append(segment)
            continue
        if tuple(part.lower() for part in canonical) in secrets.prefixes:
            segment = f"link:{link_id or 'unknown'}"
        canonical.append(segment)
        written.append(segment)
    return _SECRET_LIKE.sub(SECRET_PLACEHOLDER, "/".join(written))


#: `ACCESS_LOG_ADDRESSES`: what of the client's address the access line keeps.
ADDRESS_MODES = ("full", "truncated", "none")
#: The network a truncated address names: as many people as share a provider's block.
TRUNCATED_PREFIX = {4: 24, 6: 48}


def logged_address(address: str | None, mode: str) -> str | None:
    """The client's address as the access line keeps it (`mode`, one of `ADDRESS_MODES`):
    whole, its network (IPv4 /24, IPv6 /48, written as the network's first address), or
    nothing. Something that is not an address is kept only whole."""
    if mode == "full":
        return address
    if mode == "none" or not address:
        return None
    try:
        parsed = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    network = ipaddress.ip_network(f"{parsed}/{TRUNCATED_PREFIX[parsed.version]}", strict=False)
    return str(network.network_address)


class RequestLogMiddleware:
    """Assigns the request id (the client's `X-Request-ID` if sane), echoes it, logs the line
    (`secrets`: the paths that carry a secret, see `secret_paths`; `addresses`: what of the
    client's address it keeps, see `logged_address`)."""

    def __init__(self, app: WSGIApp, secrets: SecretPaths, addresses: str = "truncated") -> None:
        self.app = app
        self.secrets = secrets
        self.addresses = addresses

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        started = time.perf_counter()
        offered = environ.get("HTTP_X_REQUEST_ID", "")
        request_id = offered if _VALID_REQUEST_ID.fullmatch(offered) else uuid.uuid4().hex
        environ[REQUEST_ID_ENVIRON] = request_id
        status: list[str] = []

        def start(code: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            status[:] = [code]
            headers = [(k, v) for k, v in headers if k.lower() != "x-request-id"]
            headers.append(("X-Request-ID", request_id))
            return start_response(code, headers, exc_info)

        body = self.app(environ, start)
        pumped = getattr(body, "file", None)
        if isinstance(pumped, PumpedBody):
            # Handed to the server's event loop as it is (app/streaming.py); logged when sent.
            pumped.on_close(lambda sent: self._log(environ, status, sent, started))
            return body
        return _LoggedBody(body, lambda sent: self._log(environ, status, sent, started))

    def _log(self, environ: dict[str, Any], status: list[str], sent: int, started: float) -> None:
        code = int(status[0].split(" ", 1)[0]) if status else 0
        offloaded = environ.get(OFFLOADED_STATUS_ENVIRON)
        fields: dict[str, Any] = {"offloaded": True} if offloaded is not None else {}
        access_log.info(
            "request",
            extra={
                "fields": {
                    "message": "request",
                    "request_id": environ[REQUEST_ID_ENVIRON],
                    "method": environ.get("REQUEST_METHOD"),
                    "path": redacted_path(
                        environ.get("PATH_INFO") or "",
                        environ.get(SHARE_LINK_ENVIRON),
                        self.secrets,
                    ),
                    "status": offloaded if offloaded is not None and code == 200 else code,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                    "bytes": sent,
                    "user_id": environ.get(USER_ID_ENVIRON),
                    "remote_addr": logged_address(environ.get("REMOTE_ADDR"), self.addresses),
                    **fields,
                }
            },
        )


class _LoggedBody:
    """Counts the bytes the server takes from the body; logs once the server closes it."""

    def __init__(self, body: Iterable[bytes], on_close: Callable[[int], None]) -> None:
        self.body = body
        self.on_close = on_close
        self.sent = 0
        self.logged = False

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.body:
            self.sent += len(chunk)
            yield chunk

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            if not self.logged:
                self.logged = True
                self.on_close(self.sent)
