"""`flask serve` with several processes (`SERVER_PROCESSES`): one Python process runs on one
core at a time, so the server forks as many as asked, each a waitress with its own threads.

The parent builds the app and binds the sockets (so a port in use is one line, as for one
process), then forks; it serves nothing itself. Before forking it moves what the processes
must share into a file of theirs (`app.extensions["share_between_processes"]`: the rate
limits, the statistics' double-click memory; app/shared.py) and closes its database
connections, so that no child inherits one. Each child starts its own threads (statistics
flush, outboxes, the cache's listener) as it serves, as a single process does.

SIGTERM or SIGINT to the parent is passed on to every child; each finishes, runs
`app.extensions["at_process_exit"]` (the statistics' last flush) and ends, then the parent.
A child never runs the `atexit` handlers it inherited: they are its parent's (a temporary
folder of the parent's would go with the first child to end). A child that ends by itself is
logged and replaced, unless it ended within `SHORTEST_LIFE` of its start (it would only fail
again): then the server stops, with exit status 1. A child dies with its parent, even one
killed with SIGKILL.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import socket
import tempfile
import time
from pathlib import Path
from typing import Any, NoReturn

from flask import Flask

from app.extensions import db
from app.server import make_server, serve_until_stopped
from app.shared import FILE_NAME

log = logging.getLogger(__name__)

#: A child that ends by itself sooner than this after its start stops the server.
SHORTEST_LIFE = 10.0
_STOPS = {signal.SIGTERM, signal.SIGINT}
_PR_SET_PDEATHSIG = 1


def serve_in_processes(app: Flask, sockets: list[socket.socket], count: int, threads: int) -> int:
    """Serve `app` from `count` forked processes on `sockets` (one each, or one for all) until
    a stop; the exit status."""
    folder = Path(tempfile.mkdtemp(prefix="file-repository-processes-"))
    try:
        for share in app.extensions.get("share_between_processes", ()):
            share(folder / FILE_NAME)
        db.session.remove()  # the checks before serving read in it
        for engine in db.engines.values():
            engine.dispose()
        return Supervisor(app, sockets, count, threads).run()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class Supervisor:
    """The parent: starts the children, replaces one that dies, passes a stop on."""

    def __init__(
        self,
        app: Flask,
        sockets: list[socket.socket],
        count: int,
        threads: int,
    ) -> None:
        self.app = app
        self.sockets = sockets
        self.count = count
        self.threads = threads
        self.children: dict[int, tuple[int, float]] = {}  # pid: (slot, started)
        self.stopping = False
        self.parent = os.getpid()

    def run(self) -> int:
        for stop in _STOPS:
            signal.signal(stop, self._stop)
        for slot in range(self.count):
            self._start(slot)
        status = 0
        while self.children:
            try:
                pid, wait_status = os.wait()
            except ChildProcessError:
                break
            slot, started = self.children.pop(pid, (-1, 0.0))
            if slot < 0 or self.stopping:
                continue
            how = _how_it_ended(wait_status)
            if time.monotonic() - started < SHORTEST_LIFE:
                log.error("serving process %s %s right after its start: stopping", pid, how)
                status = 1
                self._stop(signal.SIGTERM, None)
            else:
                log.error("serving process %s %s: starting another", pid, how)
                self._start(slot)
        return status

    def _start(self, slot: int) -> None:
        # A stop arriving between the fork and the bookkeeping would miss the new child.
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
        try:
            if self.stopping:  # a stop came while the others were being started
                return
            pid = os.fork()
            if pid == 0:
                self._serve(slot)
            self.children[pid] = (slot, time.monotonic())
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)

    def _stop(self, signum: int, frame: Any) -> None:
        self.stopping = True
        for pid in list(self.children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def _serve(self, slot: int) -> NoReturn:
        """The child: serve until a stop, then the exit hooks; never returns."""
        status = 1
        try:
            for stop in _STOPS:
                signal.signal(stop, _stop_serving)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
            _die_with(self.parent)
            mine = self.sockets[slot % len(self.sockets)]
            for sock in self.sockets:
                if sock is not mine:
                    sock.close()
            with self.app.app_context():
                for engine in db.engines.values():
                    engine.dispose(close=False)  # nothing of the parent's: it closed its own
            serve_until_stopped(make_server(self.app, None, None, self.threads, sockets=[mine]))
            status = 0
        except BaseException:
            log.exception("serving process %s failed", os.getpid())
        finally:
            status = _run_exit_hooks(self.app) or status
            logging.shutdown()
            os._exit(status)


def _stop_serving(signum: int, frame: Any) -> None:
    """The first stop ends the serving; later ones (Ctrl-C reaches the whole process group,
    then the parent passes it on) must not break into the last flush."""
    for stop in _STOPS:
        # Not SIG_IGN: a signal already pending would then raise ("ignored due to race").
        signal.signal(stop, _stopping_already)
    raise KeyboardInterrupt


def _stopping_already(signum: int, frame: Any) -> None:
    pass


def _run_exit_hooks(app: Flask) -> int:
    failed = 0
    for hook in app.extensions.get("at_process_exit", ()):
        try:
            hook()
        except Exception:
            log.exception("an exit handler of serving process %s failed", os.getpid())
            failed = 1
    return failed


def _die_with(parent: int) -> None:
    """Ask Linux to kill this process when its parent dies (elsewhere: nothing)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request was made
        os._exit(1)


def _how_it_ended(wait_status: int) -> str:
    code = os.waitstatus_to_exitcode(wait_status)
    if code < 0:
        return f"was killed by {signal.Signals(-code).name}"
    return f"ended with status {code}"
