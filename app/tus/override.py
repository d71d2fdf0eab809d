"""tus's `X-HTTP-Method-Override` (tus 1.0.0, "Headers"): a client whose environment cannot
send PATCH or DELETE sends POST with the method in this header, and the server "MUST"
interpret the header as the request's method and ignore the actual one. A WSGI wrapper, so the
method is replaced before Flask routes the request; only under the tus prefix, and only by a
method a tus route answers (any other value is ignored)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

PREFIX = "/api/uploads"
HEADER = "X-HTTP-Method-Override"
#: The methods of the tus routes (app/tus/routes.py); a request may be overridden to these.
METHODS = frozenset({"POST", "HEAD", "PATCH", "DELETE", "OPTIONS"})


def under_prefix(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def effective_method(method: str, path: str, override: str | None) -> str:
    """The method a request to `path` is routed by: the override's, where it counts."""
    if override is None or not under_prefix(path):
        return method
    wanted = override.strip().upper()
    return wanted if wanted in METHODS else method


class MethodOverride:
    """Routes a request under the tus prefix by its `X-HTTP-Method-Override`."""

    def __init__(self, wsgi_app: Callable[..., Iterable[bytes]]) -> None:
        self.wsgi_app = wsgi_app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        method = environ.get("REQUEST_METHOD", "GET")
        wanted = effective_method(
            method, environ.get("PATH_INFO", ""), environ.get("HTTP_X_HTTP_METHOD_OVERRIDE")
        )
        if wanted != method:
            environ["tus.sent_method"] = method
            environ["REQUEST_METHOD"] = wanted
        return self.wsgi_app(environ, start_response)
