"""Waitress, set up for this service: its limits, and its own errors in the API's JSON shape."""

from __future__ import annotations

import ctypes
import json
from typing import Any

from flask import Flask
from waitress.channel import HTTPChannel
from waitress.server import create_server
from waitress.task import ErrorTask

from app.errors import MESSAGES


class JSONErrorTask(ErrorTask):
    """Waitress answers some requests itself (a body over the limit is refused with 413
    before it is read, broken framing gets 400); those answers use the API's error shape."""

    def execute(self) -> None:
        error = self.request.error
        body = json.dumps({"message": MESSAGES.get(error.code, error.reason)}).encode()
        self.status = f"{error.code} {error.reason}"
        self.response_headers.append(("Content-Type", "application/json"))
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class Channel(HTTPChannel):
    error_task_class = JSONErrorTask


#: Blocks from this size up are mmapped: S3 part buffers (8 MiB) return to the system when
#: freed. The 1 MiB request and download chunks stay below it on purpose: mmapping them costs
#: a fresh, zeroed mapping per chunk, which made uploads three times slower at 1 MiB.
MMAP_THRESHOLD = 4 * 1024 * 1024


#: Heaps glibc may keep for threads (by default 8 per core): the freed chunks of every
#: request thread and part uploader otherwise stay resident in a heap of their own.
ARENA_MAX = 2


def release_freed_memory_to_the_system() -> None:
    """Ask glibc to serve large blocks (upload parts) by mmap and to share a few heaps among
    threads, so freed buffers are reused or go back to the system instead of piling up per
    thread; does nothing elsewhere. Call it before the server starts its threads."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    m_arena_max, m_mmap_threshold = -8, -3
    libc.mallopt(m_mmap_threshold, MMAP_THRESHOLD)
    libc.mallopt(m_arena_max, ARENA_MAX)


def make_server(app: Flask, host: str, port: int, threads: int, **options: Any) -> Any:
    server = create_server(
        app,
        host=host,
        port=port,
        threads=threads,
        # Refused before reading; waitress's own default (1 GiB) would refuse legitimate
        # uploads of 25 files of 200 MB.
        max_request_body_size=app.config["MAX_CONTENT_LENGTH"],
        channel_timeout=300,
        ident="file-repository",
        # Large transfers: read the socket in 1 MiB steps (8 KiB by default, which caps the
        # intake of an upload) and let a response buffer a few MiB before spilling to disk.
        recv_bytes=1024 * 1024,
        outbuf_overflow=2 * 1024 * 1024,
        outbuf_high_watermark=2 * 1024 * 1024,
        **options,
    )
    server.channel_class = Channel
    return server
