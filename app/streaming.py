"""Response bodies that the server's event loop sends, so a slow or stalled reader holds no
request thread.

Under `flask serve` (app/server.py) a download is handed to waitress as a `wsgi.file_wrapper`
around a `PumpedBody`: a small thread per body reads the storage stream ahead into a bounded
buffer, and waitress's event loop sends from that buffer whenever the client's socket takes
more. The request thread is free as soon as the headers are decided. A client that stops
reading is closed by waitress's idle check (`CLIENT_STALL_SECONDS`) and its pump ends with it.
Other WSGI servers (and the test client) get the storage reader itself, streamed in the
request thread as before.
"""

from __future__ import annotations

import ctypes
import io
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

log = logging.getLogger(__name__)

#: The environ key under which app/server.py offers the event loop: a callable that wakes
#: it (waitress's trigger). Absent under any other server.
EVENT_LOOP_WAKE = "file_repository.wake_event_loop"

#: Read-ahead per body: what a slow client costs in memory, beside its socket buffers.
BUFFER_BYTES = 256 * 1024
#: Storage reads for pumped bodies are this large at most, so that read-ahead stays bounded.
READ_BYTES = 256 * 1024
#: Bodies up to this size are written by the request thread without waiting for the client.
SMALL_BODY_BYTES = 1024 * 1024


class BodyFailed(OSError):
    """The storage stream broke off after the headers were sent: the connection is closed,
    which is the only way left to tell the client that the body is incomplete."""


class Withdrawn(BodyFailed):
    """The right to the body ended while it streamed (a revoked token or share link, a
    deactivated account, a record no longer released): the connection is closed short."""


class Rechecked:
    """`chunks` (an iterable with `close`) as they are read, asking `still_allowed()` at most
    once every `every_seconds` (never per chunk: a check is a database read); once it says
    no, the stream ends with `Withdrawn`. The first check is `every_seconds` after the
    start: the request itself was just checked."""

    def __init__(
        self,
        chunks: Iterable[bytes],
        still_allowed: Callable[[], bool],
        every_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.chunks = chunks
        self.still_allowed = still_allowed
        self.every_seconds = every_seconds
        self.clock = clock

    def __iter__(self) -> Iterator[bytes]:
        checked = self.clock()
        for chunk in self.chunks:
            if self.clock() - checked >= self.every_seconds:
                if not self.still_allowed():
                    raise Withdrawn("the right to this download ended while it streamed")
                checked = self.clock()
            yield chunk

    def close(self) -> None:
        close = getattr(self.chunks, "close", None)
        if close is not None:
            close()


class PumpedBody(io.RawIOBase):
    """A file-like view of a chunk stream for waitress's `ReadOnlyFileBasedBuffer`.

    Waitress reads it with `tell`, `read` and `seek` back (to peek), then `seek(n, 1)` once the
    socket took n bytes. `read` never blocks: with nothing buffered it gives b"" and the
    channel (app/server.py) stops polling the socket for writing until `ready()`; the pump
    wakes the event loop whenever the buffer stops being empty.
    """

    def __init__(
        self,
        chunks: Iterable[bytes],
        length: int,
        wake: Callable[[], None],
        *,
        buffer_bytes: int = BUFFER_BYTES,
    ) -> None:
        super().__init__()
        self.length = length
        self._chunks = chunks
        self._wake = wake
        self._limit = buffer_bytes
        self._cond = threading.Condition()
        self._buffer: deque[bytes] = deque()
        self._head = 0  # bytes of _buffer[0] already sent
        self._buffered = 0  # bytes in _buffer not yet sent
        self._sent = 0  # stream offset of the first unsent byte
        self._pos = 0  # waitress's read position (>= _sent)
        self._received = 0
        self._error: BaseException | None = None
        self._stopped = False
        self._on_close: list[Callable[[int], None]] = []
        self._thread = threading.Thread(target=self._pump, name="body pump", daemon=True)
        self._thread.start()

    # waitress's side (event loop thread) -------------------------------------------------

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_END:
            # Only waitress's size probe (`prepare`) seeks to the end; it seeks back at once.
            self._pos = self.length + offset
            return self._pos
        target = self._pos + offset if whence == io.SEEK_CUR else offset
        with self._cond:
            if whence == io.SEEK_CUR and offset > 0:
                self._consume(target - self._sent)
            elif not self._sent <= target <= self._sent + self._buffered:
                raise io.UnsupportedOperation("a pumped body seeks only within its buffer")
        self._pos = target
        return target

    def read(self, size: int = -1) -> bytes:
        with self._cond:
            skip = self._pos - self._sent
            available = self._buffered - skip
            if available <= 0:
                if self._error is not None:
                    raise BodyFailed(f"the stored content could not be read: {self._error}")
                return b""
            wanted = available if size < 0 else min(size, available)
            data = self._peek(skip, wanted)
        self._pos += len(data)
        return data

    def ready(self) -> bool:
        """Whether the event loop has something to do: bytes to send, or a failure to end."""
        with self._cond:
            return self._buffered > self._pos - self._sent or self._error is not None

    def on_close(self, callback: Callable[[int], None]) -> None:
        """Call `callback(bytes sent)` once the server is done with this body."""
        self._on_close.append(callback)

    def close(self) -> None:
        if self.closed:
            return
        with self._cond:
            self._stopped = True
            self._buffer.clear()
            self._buffered = 0
            self._cond.notify_all()
        super().close()
        for callback in self._on_close:
            try:
                callback(self._sent)
            except Exception:  # a logging hook must not break the server's clean-up
                log.exception("on_close hook of a pumped body failed")

    def _peek(self, skip: int, size: int) -> bytes:
        pieces: list[bytes] = []
        offset = self._head + skip
        for chunk in self._buffer:
            if offset >= len(chunk):
                offset -= len(chunk)
                continue
            piece = chunk[offset : offset + size]
            pieces.append(piece)
            size -= len(piece)
            offset = 0
            if not size:
                break
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def _consume(self, count: int) -> None:
        if count > self._buffered:
            raise io.UnsupportedOperation("skipped past the buffered bytes")
        self._sent += count
        self._buffered -= count
        count += self._head
        while self._buffer and count >= len(self._buffer[0]):
            count -= len(self._buffer.popleft())
        self._head = count
        if self._buffered < self._limit:
            self._cond.notify_all()

    # the pump's side ----------------------------------------------------------------------

    def _pump(self) -> None:
        chunks = iter(self._chunks)
        try:
            while self._received < self.length:
                with self._cond:
                    while self._buffered >= self._limit and not self._stopped:
                        self._cond.wait()
                    if self._stopped:
                        return
                chunk = next(chunks, b"")
                if not chunk:
                    raise BodyFailed(f"ended {self.length - self._received} bytes early")
                with self._cond:
                    if self._stopped:
                        return
                    was_empty = self._buffered <= self._pos - self._sent
                    self._buffer.append(chunk)
                    self._buffered += len(chunk)
                    self._received += len(chunk)
                if was_empty:
                    self._wake()
        except Exception as exc:
            level = logging.INFO if isinstance(exc, Withdrawn) else logging.WARNING
            log.log(level, "download body broke off: %s", exc)
            with self._cond:
                self._error = exc
            self._wake()
        finally:
            close = getattr(self._chunks, "close", None)
            if close is not None:
                close()


def event_loop_body(
    environ: dict[str, Any], reader: Any, length: int, *, buffer_bytes: int = BUFFER_BYTES
) -> Any:
    """The body to hand to the WSGI server for `reader` (an iterable of chunks with `close`):
    pumped into the event loop under `flask serve`, the reader itself elsewhere and for
    small bodies, which waitress takes into its output buffer at once (its high watermark
    is larger), so that they never hold a request thread either and skip the pump's
    thread start."""
    wake = environ.get(EVENT_LOOP_WAKE)
    file_wrapper = environ.get("wsgi.file_wrapper")
    if wake is None or file_wrapper is None or length <= SMALL_BODY_BYTES:
        return reader
    return file_wrapper(PumpedBody(reader, length, wake, buffer_bytes=buffer_bytes))


def trim_freed_memory() -> None:
    """Give back to the system the heap pages that freed memory left empty (glibc's
    `malloc_trim`; nothing elsewhere). For a request thread that allocated and freed much
    before handing over a long body (an archive reads its whole manifest once to measure
    it): the heap otherwise stays at that high-water mark, resident beside the long-lived
    buffers of slow readers. About 2 ms with a 200 MB heap."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return
