"""The baselines' own server: a bare WSGI app under waitress with the service's settings.

``POST /upload`` copies the request body to a file in ``--dir`` (temporary name, fsync, rename:
what the local storage backend does on commit) and answers ``{"size": n}``. The server is built
by the app's own ``app.server.make_server``: exactly the waitress settings of ``flask serve``.

With ``--s3`` it is also the bare forwarder, the ceiling of the service's S3 transfers (issue
12), its S3 backend built by ``app.storage.create_storage`` from the app's settings in the
environment: ``GET /s3?key=K`` reads K with the app's ``S3Storage.open`` (a presigned GET;
``Range: bytes=a-b`` passed on: 206) and sends it as the service sends
(``app.streaming.event_loop_body``); ``POST /s3?key=K`` hands the spooled request body, read
with ``readinto`` into one reused buffer, to the app's S3 writer (the same multipart upload),
stored as it comes: no parsing, no hashing, no type check, no database.

    python -m bench.bare --port 8001 --dir /tmp/bare [--s3]
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
from app.server import make_server, release_freed_memory_to_the_system, serve_until_stopped
from app.streaming import READ_BYTES, event_loop_body

READ_SIZE = MiB  # what the app's multipart reader asks waitress for
#: Steps in which the forwarder reads an upload's spooled body into its writer: the writer's
#: first part. Steps of 2 MiB and more took less of the forwarder's CPU than 1 MiB steps, and
#: larger ones no more (BENCHMARKS.md, "Ceiling: a bare forwarder").
UPLOAD_READ_BYTES = 8 * MiB


class BareApp:
    # make_server reads its limits from here, as from a Flask app's config: the defaults.
    config = {
        **settings_from_env({}, tempfile.gettempdir()),
        "MAX_CONTENT_LENGTH": MAX_REQUEST_SIZE,
    }

    def __init__(self, target: Path, storage: Any = None) -> None:
        self.target = target
        self.storage = storage  # an S3Storage for the forwarder's /s3, else None

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        if path == "/upload" and method in ("POST", "PUT"):
            size = self._store(environ["wsgi.input"])
            return self._answer(start_response, "201 Created", {"size": size})
        if path == "/s3" and self.storage is not None:
            query = dict(parse_qsl(environ.get("QUERY_STRING", "")))
            key = query.get("key", "")
            if method == "GET":
                return self._forward_download(environ, start_response, key)
            if method in ("POST", "PUT"):
                size = self._forward_upload(environ["wsgi.input"], key)
                return self._answer(start_response, "201 Created", {"size": size, "key": key})
        return self._answer(start_response, "404 Not Found", {"message": "Not found."})

    def _store(self, stream: Any) -> int:
        fd, tmp_name = tempfile.mkstemp(dir=self.target, prefix="upload-")
        size = 0
        with os.fdopen(fd, "wb") as file:
            while chunk := stream.read(READ_SIZE):
                file.write(chunk)
                size += len(chunk)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp_name, self.target / uuid.uuid4().hex)
        return size

    def _forward_download(
        self, environ: dict[str, Any], start_response: Callable[..., Any], key: str
    ) -> Iterable[bytes]:
        """The app's own read (``S3Storage.open``), sent as the service sends
        (``event_loop_body``). Ranges of the form ``bytes=a-b`` or ``bytes=a-``."""
        start, end = 0, None
        range_header = environ.get("HTTP_RANGE")
        if range_header:
            first, _, last = range_header.removeprefix("bytes=").partition("-")
            start, end = int(first), int(last) if last else None
        reader = self.storage.open(key, start, end, chunk_size=READ_BYTES)
        headers = [("Content-Type", "application/octet-stream"), ("Accept-Ranges", "bytes")]
        headers.append(("Content-Length", str(reader.length)))
        if range_header:
            content_range = f"bytes {start}-{start + reader.length - 1}/{reader.size}"
            headers.append(("Content-Range", content_range))
        start_response("206 Partial Content" if range_header else "200 OK", headers)
        return event_loop_body(environ, reader, reader.length)

    def _forward_upload(self, stream: Any, key: str) -> int:
        """The request body, as waitress spooled it, to the app's own S3 writer: ``readinto``
        one reused buffer (no allocation per read), then ``write``."""
        writer = self.storage.writer(key)
        buffer = bytearray(UPLOAD_READ_BYTES)
        view = memoryview(buffer)
        readinto = getattr(stream, "readinto", None)
        try:
            while True:
                if readinto is not None:
                    count = readinto(buffer)
                    if not count:
                        break
                    writer.write(view[:count])
                else:
                    chunk = stream.read(UPLOAD_READ_BYTES)
                    if not chunk:
                        break
                    writer.write(chunk)
            writer.commit()
        except BaseException:
            writer.abort()
            raise
        return writer.size

    @staticmethod
    def _answer(start_response: Callable[..., Any], status: str, body: dict) -> list[bytes]:
        data = json.dumps(body).encode()
        start_response(
            status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
        )
        return [data]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--dir", type=Path, required=True, help="where uploads are written")
    parser.add_argument("--s3", action="store_true", help="also /s3, the forwarder (S3 from env)")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    # What `flask serve` does before its threads start: 1 MiB chunks come from the heap
    # instead of a fresh mmap each (which costs the copy loops a page fault per page).
    release_freed_memory_to_the_system()
    storage = None
    if args.s3:
        from app.storage import create_storage

        storage = create_storage(os.environ)
    app = BareApp(args.dir, storage=storage)
    server = make_server(
        app,  # type: ignore[arg-type]
        host="127.0.0.1",
        port=args.port,
        threads=BareApp.config["SERVER_THREADS"],
        may_send_large_body=lambda _authorization: True,  # the same hold-and-admit path
    )
    print(f"Serving on http://{server.effective_host}:{server.effective_port}", flush=True)
    try:
        serve_until_stopped(server)
    finally:
        if storage is not None:
            storage.close()


if __name__ == "__main__":
    main()
