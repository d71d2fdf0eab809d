"""The baselines' own server: a bare WSGI app under waitress with the service's settings.

``POST /upload`` copies the request body to a file in ``--dir`` (temporary name, fsync, rename:
what the local storage backend does on commit) and answers ``{"size": n}``; ``GET /json``
answers ``{"status": "ok"}`` without any framework; ``GET /blob?size=N&chunk=C`` streams N
bytes from memory in chunks of C (what waitress alone can send). The server is built by the
app's own ``app.server.make_server``, so it has exactly the waitress settings of ``flask serve``;
``--adj name=value`` adds a waitress setting, for experiments (e.g. ``recv_bytes=1048576``).

    python -m bench.bare --port 8001 --dir /tmp/bare
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from app.config import MAX_REQUEST_SIZE, MiB, settings_from_env
from app.server import make_server

READ_SIZE = MiB  # what the app's multipart reader asks waitress for


class BareApp:
    # make_server reads its limits from here, as from a Flask app's config: the defaults.
    config = {
        **settings_from_env({}, tempfile.gettempdir()),
        "MAX_CONTENT_LENGTH": MAX_REQUEST_SIZE,
    }

    def __init__(self, target: Path, fsync: bool = True) -> None:
        self.target = target
        self.fsync = fsync

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        if path == "/json" and method == "GET":
            return self._answer(start_response, "200 OK", {"status": "ok"})
        if path == "/blob" and method == "GET":
            query = dict(parse_qsl(environ.get("QUERY_STRING", "")))
            return self._blob(start_response, int(query["size"]), int(query.get("chunk", 262144)))
        if path == "/upload" and method in ("POST", "PUT"):
            size = self._store(environ["wsgi.input"])
            return self._answer(start_response, "201 Created", {"size": size})
        return self._answer(start_response, "404 Not Found", {"message": "Not found."})

    def _store(self, stream: Any) -> int:
        fd, tmp_name = tempfile.mkstemp(dir=self.target, prefix="upload-")
        size = 0
        with os.fdopen(fd, "wb") as file:
            while chunk := stream.read(READ_SIZE):
                file.write(chunk)
                size += len(chunk)
            file.flush()
            if self.fsync:
                os.fsync(file.fileno())
        os.replace(tmp_name, self.target / uuid.uuid4().hex)
        return size

    @staticmethod
    def _blob(start_response: Callable[..., Any], size: int, chunk: int) -> Iterable[bytes]:
        block = bytes(chunk)
        start_response(
            "200 OK",
            [("Content-Type", "application/octet-stream"), ("Content-Length", str(size))],
        )

        def chunks() -> Iterable[bytes]:
            left = size
            while left > 0:
                yield block if left >= chunk else block[:left]
                left -= chunk

        return chunks()

    @staticmethod
    def _answer(start_response: Callable[..., Any], status: str, body: dict) -> list[bytes]:
        data = json.dumps(body).encode()
        start_response(
            status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
        )
        return [data]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=8, help="as SERVER_THREADS [8]")
    parser.add_argument("--dir", type=Path, required=True, help="where uploads are written")
    parser.add_argument("--no-fsync", action="store_true", help="skip the fsync before rename")
    parser.add_argument(
        "--adj", action="append", default=[], help="extra waitress setting name=value"
    )
    args = parser.parse_args()
    options = {}
    for item in args.adj:
        name, _, value = item.partition("=")
        options[name] = int(value) if value.isdigit() else value
    args.dir.mkdir(parents=True, exist_ok=True)
    app = BareApp(args.dir, fsync=not args.no_fsync)
    server = make_server(
        app,  # type: ignore[arg-type]
        host=args.host,
        port=args.port,
        threads=args.threads,
        may_send_large_body=lambda _authorization: True,  # the same hold-and-admit path
        **options,
    )
    print(f"Serving on http://{server.effective_host}:{server.effective_port}", flush=True)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


if __name__ == "__main__":
    main()
