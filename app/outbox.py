"""The thread that works an outbox table after the commits that filled it: the mail of release
requests (app/releases/mail.py) and the DOIs owed to DataCite (app/doi/worker.py).

One per process, started on the first poke. It is poked after a commit that made something
due, and wakes by itself when the next retry falls due; an error is logged and retried later,
never the end of the thread. A request never waits for it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from flask import Flask

from app.extensions import db

log = logging.getLogger(__name__)


class OutboxThread:
    """Works an outbox with `work` (which sends what is due and returns in how many seconds
    the next retry falls due, None for none) in an app context of its own."""

    def __init__(
        self, app: Flask, name: str, work: Callable[[], float | None], retry_setting: str
    ) -> None:
        self.app = app
        self.name = name
        self.work = work
        #: The setting that says how long to wait after a pass that failed as a whole.
        self.retry_setting = retry_setting
        self.wake = threading.Event()
        #: Set while the thread waits between passes (holding no connection).
        self.idle = threading.Event()
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def poke(self) -> None:
        with self.lock:
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self.thread.start()
        self.idle.clear()
        self.wake.set()

    def _run(self) -> None:
        wait: float | None = None
        while True:
            if not self.wake.is_set():
                self.idle.set()
            self.wake.wait(timeout=wait)
            self.idle.clear()
            self.wake.clear()
            with self.app.app_context():
                try:
                    wait = self.work()
                except Exception:  # noqa: BLE001 - the thread must live on; logged
                    log.exception("working the outbox of thread %s failed", self.name)
                    wait = self.app.config[self.retry_setting]
                finally:
                    db.session.remove()
