"""A TCP proxy on loopback that injects faults between the app and a real server.

Modes: `pass` (forward), `refuse` (accept, then close at once: as a dead backend), `reset`
(forward, but cut every open connection now and each new one after `cut_after` bytes),
`delay` (forward after `delay` seconds per chunk) and `http503` (answer every HTTP request with
503 without contacting the backend). Threads only, no dependencies; stopped by `close()`.
"""

from __future__ import annotations

import socket
import threading
import time
from contextlib import suppress

HTTP_503 = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n"
    b"Content-Length: 113\r\nConnection: close\r\n\r\n"
    b'<?xml version="1.0"?><Error><Code>ServiceUnavailable</Code><Message>injected</Message>'
    b"</Error>\n\n\n\n\n\n"
)


class FaultProxy:
    def __init__(self, backend_host: str, backend_port: int) -> None:
        self.backend = (backend_host, backend_port)
        self.mode = "pass"
        self.delay = 0.5
        self.cut_after = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def set_mode(self, mode: str) -> None:
        assert mode in ("pass", "refuse", "reset", "delay", "http503"), mode
        self.mode = mode
        if mode in ("refuse", "reset", "http503"):
            self.cut_all()

    def cut_all(self) -> None:
        """Drop every connection that is open now (pooled ones included)."""
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with suppress(OSError):
                sock.close()

    def close(self) -> None:
        self._closed = True
        with suppress(OSError):
            self._listener.close()
        self.cut_all()

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        mode = self.mode
        if mode == "refuse":
            client.close()
            return
        if mode == "http503":
            with suppress(OSError):
                client.recv(65536)
                client.sendall(HTTP_503)
            client.close()
            return
        try:
            backend = socket.create_connection(self.backend, timeout=10)
        except OSError:
            client.close()
            return
        self._track(client)
        self._track(backend)
        budget = [self.cut_after if mode == "reset" else None]
        threading.Thread(target=self._pipe, args=(client, backend, budget), daemon=True).start()
        self._pipe(backend, client, budget)

    def _pipe(self, source: socket.socket, target: socket.socket, budget: list) -> None:
        try:
            while chunk := source.recv(65536):
                if self.mode == "delay":
                    time.sleep(self.delay)
                if budget[0] is not None:
                    budget[0] -= len(chunk)
                    if budget[0] < 0:
                        break
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with suppress(OSError):
                    sock.close()
