"""Waitress, set up for a service on the open internet.

What waitress does not do by itself, added here (the reasons are in docs/security.md):
- Response bodies of downloads are sent by the event loop (app/streaming.py), so slow and
  stalled readers hold no request thread; a client that takes nothing for
  `CLIENT_STALL_SECONDS` is disconnected (waitress's idle check).
- A request whose headers are not complete within `HEADER_TIMEOUT_SECONDS` is closed, and the
  connection limit is high (poll, not select), so idle or trickling connections lock nobody out.
- Before a body is read: one larger than 1 MiB needs a valid token (401 otherwise), the app
  may answer it from its headers (`app.extensions["body_checks"]`, e.g. a tus PATCH for no
  upload), and all bodies being received together stay within `SPOOL_LIMIT_MB` (503 with
  Retry-After otherwise).
- A request with both Content-Length and Transfer-Encoding is refused (400).
- Waitress's own answers (413, 400, 401, 503) use the API's JSON error shape, plus the headers
  the app asks for on their path (`app.extensions["server_answer_headers"]`, e.g. tus's).
"""

from __future__ import annotations

import ctypes
import fcntl
import ipaddress
import json
import logging
import os
import resource
import socket
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

from flask import Flask
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser, ParsingError
from waitress.server import create_server
from waitress.task import ErrorTask, WSGITask
from waitress.utilities import Error

from app.errors import MESSAGES
from app.http import links_follow_any_host
from app.streaming import EVENT_LOOP_WAKE, PumpedBody

log = logging.getLogger(__name__)

#: The largest body a request without a valid token may send (token requests, small forms).
UNAUTHENTICATED_BODY_BYTES = 1024 * 1024
#: Chunked bodies have no announced size: they reserve spool space in steps of this size.
CHUNKED_RESERVATION_STEP = 8 * 1024 * 1024


class Unauthenticated(Error):
    code = 401
    reason = "Unauthorized"
    headers = (("WWW-Authenticate", "Bearer"),)


class SpoolFull(Error):
    code = 503
    reason = "Service Unavailable"
    message = "The server is receiving too many uploads at once; try again shortly."
    headers = (("Retry-After", "30"),)


class Refused(Error):
    """An answer the app gives before a large body is read (`app.extensions["body_checks"]`)."""

    def __init__(self, code: int, message: str, headers: dict[str, str]) -> None:
        super().__init__(message)
        self.code, self.message = code, message
        try:
            self.reason = HTTPStatus(code).phrase
        except ValueError:  # a status of the app's own, such as tus's 460
            self.reason = "Refused"
        self.headers = tuple(headers.items())


class JSONErrorTask(ErrorTask):
    """Waitress answers some requests itself (a body over the limit is refused with 413
    before it is read, broken framing gets 400); those answers use the API's error shape."""

    def execute(self) -> None:
        error = self.request.error
        message = getattr(error, "message", None) or MESSAGES.get(error.code, error.reason)
        body = json.dumps({"message": message}).encode()
        self.status = f"{error.code} {error.reason}"
        self.response_headers.append(("Content-Type", "application/json"))
        self.response_headers.extend(getattr(error, "headers", ()))
        present = {name.lower() for name, _ in self.response_headers}
        added = self.channel.server.answer_headers(getattr(self.request, "path", ""))
        self.response_headers.extend((k, v) for k, v in added.items() if k.lower() not in present)
        self.set_close_on_finish()
        self.content_length = len(body)
        self.write(body)


class SpoolBudget:
    """Bytes of request bodies being received by all requests together (waitress keeps them
    in memory up to a small size, then in temporary files, until the request is complete)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()

    def reserve(self, size: int) -> bool:
        with self._lock:
            if self.used + size > self.limit:
                return False
            self.used += size
            return True

    def release(self, size: int) -> None:
        with self._lock:
            self.used -= size


class Parser(HTTPRequestParser):
    """A request as waitress parses it, plus the admission of its body (see the module)."""

    budget: SpoolBudget  # set per server by make_server

    def __init__(self, adj: Any) -> None:
        super().__init__(adj)
        self.started = time.monotonic()
        self.reserved = 0
        self.held: list[bytes] | None = None  # body bytes kept back while admission runs
        self.held_dispatched = False
        self.held_back = False  # the bytes held back are being fed in
        self.continue_held = False

    def parse_header(self, header_plus: bytes) -> None:
        super().parse_header(header_plus)
        if self.chunked and "CONTENT_LENGTH" in self.headers:
            # RFC 9112 6.1: a request smuggling attempt behind a proxy that reads the other one.
            raise ParsingError("Content-Length together with Transfer-Encoding")

    def received(self, data: bytes) -> int:
        if self.held is not None:
            self.held.append(data)
            return len(data)
        was_in_header = not self.headers_finished
        consumed = super().received(data)
        if was_in_header and self.headers_finished and not self.completed:
            self._admit_body()
        elif self.chunked and not self.completed and self.body_bytes_received > self.reserved:
            self._reserve(CHUNKED_RESERVATION_STEP)
        return consumed

    def _admit_body(self) -> None:
        """Small bodies are admitted at once if the budget allows; larger ones (and chunked
        ones) wait, unread, until a request thread has checked the token (Channel)."""
        if not self.chunked and self.content_length <= UNAUTHENTICATED_BODY_BYTES:
            self._reserve(self.content_length)
            return
        self.held = []
        self.continue_held, self.expect_continue = self.expect_continue, False

    def _reserve(self, size: int) -> None:
        if self.budget.reserve(size):
            self.reserved += size
        else:
            self.error = SpoolFull("spool limit reached")
            self.completed = True

    def admitted_size(self) -> int:
        return CHUNKED_RESERVATION_STEP if self.chunked else self.content_length

    def release(self) -> None:
        if self.reserved:
            self.budget.release(self.reserved)
            self.reserved = 0

    def close(self) -> None:
        self.release()
        super().close()


class Admission:
    """Runs in a request thread: may this held request send its large body? Then feeds the
    bytes held back to the channel, or answers 401/503 without reading the rest."""

    def __init__(self, channel: Channel, request: Parser) -> None:
        self.channel = channel
        self.request = request

    def service(self) -> None:
        request = self.request
        error: Error | None = None
        try:
            if not self.channel.server.may_send_large_body(
                request.headers.get("AUTHORIZATION", "")
            ):
                error = Unauthenticated("a body over 1 MiB needs a valid token")
        except Exception:
            log.exception("token check before a large body failed")
            error = SpoolFull("token check failed")
        if error is None:
            error = self._refused_by_the_app()
        if error is None and not request.budget.reserve(request.admitted_size()):
            error = SpoolFull("spool limit reached")
        elif error is None:
            request.reserved += request.admitted_size()
        self.channel.resume(request, error)

    def _refused_by_the_app(self) -> Error | None:
        """The app's own answer to this request before its body, if it has one (a tus
        PATCH for no upload, or longer than the upload's room)."""
        request = self.request
        try:
            refusal = self.channel.server.refuse_before_body(
                request.command, request.path, request.headers
            )
        except Exception:
            log.exception("the app's check before a large body failed")
            return None  # the request goes on; the app answers it after the body
        return Refused(*refusal) if refusal is not None else None

    def cancel(self) -> None:
        self.channel.will_close = True

    def defer(self) -> None:
        pass


class Task(WSGITask):
    def get_environment(self) -> dict[str, Any]:
        environ = super().get_environment()
        environ[EVENT_LOOP_WAKE] = self.channel.server.pull_trigger
        return environ


class Channel(HTTPChannel):
    error_task_class = JSONErrorTask
    task_class = Task
    parser_class = Parser

    def received(self, data: bytes) -> bool:
        result = super().received(data)
        request = self.request
        if request is not None and request.held is not None and not request.held_dispatched:
            request.held_dispatched = True
            self.server.task_dispatcher.add_task(Admission(self, request))
        return result

    def resume(self, request: Parser, error: Error | None) -> None:
        """From the admission's thread: go on reading the body, or answer `error`."""
        held = b"".join(request.held or ())
        if error is not None:
            with self.requests_lock:
                request.error, request.completed = error, True
                request.held = None
                if self.request is request:
                    self.request = None
                self.requests.append(request)
                if len(self.requests) == 1:
                    self.server.add_task(self)
        else:
            request.expect_continue = request.continue_held
            # Reading stays off (readable()) until the bytes held back are in.
            request.held_back, request.held = True, None
            try:
                if held:
                    super().received(held)
                elif request.expect_continue and not self.requests:
                    self.send_continue()
            finally:
                request.held_back = False
        self.server.pull_trigger()

    def readable(self) -> bool:
        request = self.request
        if request is not None and (request.held is not None or request.held_back):
            return False
        return super().readable()

    def writable(self) -> bool:
        if self.will_close or self.close_when_flushed:
            return True
        if not self.total_outbufs_len:
            return False
        first = self.outbufs[0]
        body = getattr(first, "file", None)
        if isinstance(body, PumpedBody) and not body.ready():
            # Nothing to send until the pump has more; it wakes the loop when it has.
            return False
        return True

    def handle_close(self) -> None:
        request = self.request
        if request is not None:
            request.release()
        super().handle_close()


#: Blocks from this size up are mmapped: S3 part buffers (8 MiB) return to the system when
#: freed. The 1 MiB request and download chunks stay below it on purpose: mmapping them costs
#: a fresh, zeroed mapping per chunk, which slows uploads down.
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


def raise_open_file_limit(wanted: int) -> None:
    """Each connection is a file descriptor: let the process have enough of them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def serve_until_stopped(server: Any) -> None:
    """Serve until Ctrl-C (or a SIGTERM turned into it), then close the listening sockets."""
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


def make_server(
    app: Flask,
    host: str | None,
    port: int | None,
    threads: int,
    *,
    sockets: list[socket.socket] | None = None,
    may_send_large_body: Callable[[str], bool] | None = None,
    **options: Any,
) -> Any:
    """Waitress for `app` on `host`:`port`, or on `sockets` already listening (one of several
    processes: app/processes.py); `may_send_large_body(authorization header)` admits bodies
    over 1 MiB (default: the header carries a live token of this app)."""
    config = app.config
    where: dict[str, Any] = {"sockets": sockets} if sockets else {"host": host, "port": port}
    connection_limit = config["CONNECTION_LIMIT"]
    raise_open_file_limit(connection_limit + 256)
    parser = type("Parser", (Parser,), {"budget": SpoolBudget(config["SPOOL_LIMIT_MB"] * 2**20)})
    channel = type("Channel", (Channel,), {"parser_class": parser})
    options.setdefault("channel_timeout", config["CLIENT_STALL_SECONDS"])
    server = create_server(
        app,
        **where,
        threads=threads,
        # Refused before reading; waitress's own default (1 GiB) would refuse legitimate
        # uploads of 25 files of 200 MB.
        max_request_body_size=config["MAX_CONTENT_LENGTH"],
        connection_limit=connection_limit,
        # select() cannot watch descriptors above 1023; poll() can.
        asyncore_use_poll=True,
        # How often idle, stalled and header-trickling connections are looked for.
        cleanup_interval=1,
        # Waitress drops X-Forwarded-* headers unless told otherwise; behind trusted proxies
        # (PROXY_COUNT) they must reach ProxyFix, which reads only the entries those set.
        clear_untrusted_proxy_headers=not config.get("PROXY_COUNT"),
        ident="file-repository",
        # Large transfers: read the socket in 1 MiB steps (8 KiB by default, which caps the
        # intake of an upload) and let a response buffer a few MiB before spilling to disk.
        recv_bytes=1024 * 1024,
        outbuf_overflow=2 * 1024 * 1024,
        outbuf_high_watermark=2 * 1024 * 1024,
        **options,
    )
    server.channel_class = channel
    server.may_send_large_body = may_send_large_body or _token_check(app)
    server.refuse_before_body = _body_checks(app)
    server.answer_headers = _answer_headers(app)
    _watch_clients(server, config["HEADER_TIMEOUT_SECONDS"])
    _accept_in_batches(server)
    return server


#: Connections waiting to be accepted per listening socket (waitress's default).
BACKLOG = 1024


def listening_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """Sockets listening on `host`:`port` for `count` serving processes. Where the system has
    SO_REUSEPORT (Linux), one per process: the kernel spreads new connections evenly over
    them, where processes taking turns at one socket leave most connections to whichever
    wakes first. The address is first bound alone, so that a port in use (also by another
    server with SO_REUSEPORT) fails as it does for one process."""
    family, kind, proto, address = Adjustments(host=host, port=port).listen[0]
    probe = _bound(family, kind, proto, address, share=False)
    if count == 1 or not hasattr(socket, "SO_REUSEPORT"):
        probe.listen(BACKLOG)
        return [probe]
    address = (address[0], probe.getsockname()[1], *address[2:])
    probe.close()
    sockets = [_bound(family, kind, proto, address, share=True) for _ in range(count)]
    for sock in sockets:
        sock.listen(BACKLOG)
    return sockets


def _bound(family: int, kind: int, proto: int, address: Any, *, share: bool) -> socket.socket:
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if share:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def _token_check(app: Flask) -> Any:
    caller_of = app.extensions["caller_of"]  # app/auth's, handed over by the factory

    def may_send_large_body(authorization: str) -> bool:
        from app.extensions import db

        with app.app_context():
            try:
                return caller_of(authorization) is not None
            finally:
                db.session.remove()

    return may_send_large_body


def _body_checks(app: Flask) -> Any:
    """The app's checks of a held request (`app.extensions["body_checks"]`: callables of
    method, path and waitress's headers returning (status, message, headers) or None)."""

    def refuse_before_body(
        method: str, path: str, headers: dict[str, str]
    ) -> tuple[int, str, dict[str, str]] | None:
        from app.extensions import db

        checks = app.extensions.get("body_checks", ())
        if not checks:
            return None
        with app.app_context():
            try:
                for check in checks:
                    refusal = check(method, path, headers)
                    if refusal is not None:
                        return refusal
                return None
            finally:
                db.session.remove()

    return refuse_before_body


def _answer_headers(app: Flask) -> Callable[[str], dict[str, str]]:
    """Headers the app adds to the server's own answers to a path
    (`app.extensions["server_answer_headers"]`: callables of the path, e.g. tus's)."""

    def answer_headers(path: str) -> dict[str, str]:
        headers: dict[str, str] = {}
        for extra in app.extensions.get("server_answer_headers", ()):
            headers.update(extra(path))
        return headers

    return answer_headers


def _accept_in_batches(server: Any, batch: int = 64) -> None:
    """Waitress accepts one connection per turn of its event loop, and each turn looks at
    every open connection: a burst of a thousand connections would keep the next client
    waiting for seconds. Accept what is waiting, up to `batch` at a time."""
    accept_one = server.handle_accept

    def accept_waiting() -> None:
        for _ in range(batch):
            open_before = len(server._map)
            accept_one()
            if len(server._map) == open_before or open_before + 1 >= server.adj.connection_limit:
                return

    server.handle_accept = accept_waiting


def unsent_bytes(sock: socket.socket) -> int | None:
    """Bytes in the socket's send queue that the client has not acknowledged (Linux)."""
    try:
        out = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
    except (OSError, AttributeError, ValueError):
        return None
    return int.from_bytes(out, sys.byteorder, signed=True)


def _watch_clients(server: Any, header_timeout: float) -> None:
    """Waitress's idle check (`channel_timeout`) measures progress by what it sends, and
    closes connections without a running request that made none for that long. Two gaps:
    - A slow reader makes progress that waitress cannot see: the kernel's send buffer
      (megabytes) drains for a long time before the socket takes more. The bytes the client
      acknowledged count as progress too.
    - A client trickling a header line now and then is never idle: a request whose headers
      are not complete within `header_timeout` is closed."""
    maintenance = server.maintenance

    def watch(now: float) -> None:
        cutoff = time.monotonic() - header_timeout
        for channel in list(server.active_channels.values()):
            request = channel.request
            if request is not None and not request.headers_finished and request.started < cutoff:
                channel.will_close = True
            elif channel.total_outbufs_len:
                unsent = unsent_bytes(channel.socket)
                if unsent is not None and unsent < getattr(channel, "unsent", unsent + 1):
                    channel.last_activity = now
                channel.unsent = unsent
        maintenance(now)

    server.maintenance = watch


def warn_when_links_follow_any_host(app: Flask, hosts: Iterable[str]) -> None:
    """One log line when the server listens beyond loopback while links follow the client's
    `Host` (no `PUBLIC_BASE_URL`, `TRUSTED_HOSTS` or `PROXY_COUNT`): fine on one's own
    machine, the operator's decision anywhere else (docs/security.md)."""
    beyond = sorted({host for host in hosts if not _is_loopback(host)})
    if beyond and links_follow_any_host(app.config):
        log.warning(
            "listening on %s with neither PUBLIC_BASE_URL nor TRUSTED_HOSTS set: links in "
            "answers use the Host header each client sends (see docs/security.md)",
            ", ".join(beyond),
        )


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0]).is_loopback
    except ValueError:
        return host == "localhost"


def waitress_serve_hosts(argv: list[str]) -> list[str] | None:
    """The addresses `waitress-serve` (or `python -m waitress`) is about to listen on when
    this process is one, read from its command line as waitress reads it; None otherwise."""
    program = argv[0] if argv else ""
    if os.path.basename(program) != "waitress-serve" and not program.endswith(
        os.path.join("waitress", "__main__.py")
    ):
        return None
    try:
        options, _ = Adjustments.parse_args(argv[1:])
        options.pop("help", None)
        options.pop("call", None)
        listen = Adjustments(**options).listen
    except Exception:  # waitress itself reports a command line it cannot use
        return None
    return [str(sockaddr[0]) for *_, sockaddr in listen]
