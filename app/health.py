"""Liveness and readiness probes for load balancers and orchestrators (no token needed)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from flask import current_app
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from app.docs.openapi import NO_TOKEN, Blueprint
from app.extensions import db
from app.storage import Storage, StorageError

bp = Blueprint("health", __name__, tag="Operations", security=NO_TOKEN)
log = logging.getLogger(__name__)

NO_STORE = {"Cache-Control": "no-store"}

OK = "ok"
#: What the message says of a failed dependency.
UNREACHABLE = "not reachable"
UNWRITABLE = "not writable"
TOO_SLOW = "not answering in time"


def _object(**properties: object) -> dict[str, object]:
    return {"type": "object", "properties": properties, "required": list(properties)}


CHECK = {"type": "string", "enum": ["ok", "fail"]}
CHECKS = _object(database=CHECK, storage=CHECK)


@bp.get("/healthz")
@bp.doc(operationId="getHealth")
@bp.alt_response(200, schema=_object(status={"const": "ok"}), description="Alive.")
def healthz():
    """Liveness: the process answers (dependencies are not checked)"""
    return {"status": "ok"}, 200, NO_STORE


@bp.get("/readyz")
@bp.doc(operationId="getReadiness")
@bp.alt_response(200, schema=_object(status={"const": "ok"}, checks=CHECKS), description="Ready.")
@bp.alt_response(
    503,
    schema=_object(
        message={
            "type": "string",
            "description": "Names each failing dependency and how it fails: not reachable, "
            "not writable (storage) or not answering in time (storage).",
            "examples": ["Service unavailable: storage not writable."],
        },
        status={"const": "unavailable"},
        checks=CHECKS,
    ),
    description="A dependency does not answer, or the storage does not take a write; `checks` "
    "says which, `message` how.",
)
def readyz():
    """Readiness: the database answers, and the storage answers and takes a write

    The database is asked on every request. The storage is asked at most once every few
    seconds per process, whatever the polling rate: a small object is written under the key
    `files/readiness-probe` and deleted again, within a bound of a few seconds (a storage
    that takes longer is reported as failing while the probe goes on in the background).
    The answers in between repeat the last result.
    """
    problems = {"database": _check_database(), "storage": _storage_probe().status()}
    checks = {name: "ok" if problem == OK else "fail" for name, problem in problems.items()}
    failed: dict[str, list[str]] = {}
    for name, problem in problems.items():
        if problem != OK:
            failed.setdefault(problem, []).append(name)
    if failed:
        said = "; ".join(f"{', '.join(names)} {problem}" for problem, names in failed.items())
        body = {
            "message": f"Service unavailable: {said}.",
            "status": "unavailable",
            "checks": checks,
        }
        return body, 503, NO_STORE
    return {"status": "ok", "checks": checks}, 200, NO_STORE


# Anyone may ask, so answers say only which dependency fails and how; the reason goes to the
# log for operators.


def _check_database() -> str:
    try:
        db.session.execute(select(1))
        return OK
    except SQLAlchemyError as exc:
        log.warning("readiness: database check failed: %s", type(exc).__name__)
        return UNREACHABLE
    finally:
        db.session.rollback()


class StorageProbe:
    """Whether the storage answers (`Storage.check`) and takes a write
    (`Storage.check_writable`), found out at most once per `cache_seconds` in this process.

    The probe runs in a thread of its own and is waited for at most `timeout` seconds: a
    storage that hangs makes the answer "not answering in time", not a hanging request. While
    a probe runs, no second one starts, however many requests ask.
    """

    def __init__(
        self,
        storage: Storage,
        cache_seconds: float,
        timeout: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.storage = storage
        self.cache_seconds = cache_seconds
        self.timeout = timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._result: str | None = None
        self._found_at = 0.0
        self._running: threading.Event | None = None

    def status(self) -> str:
        """`OK`, or how the storage fails."""
        with self._lock:
            if self._result is not None and self._clock() - self._found_at < self.cache_seconds:
                return self._result
            done = self._running
            if done is None:
                done = self._running = threading.Event()
                threading.Thread(
                    target=self._probe, args=(done,), name="readiness-probe", daemon=True
                ).start()
        finished = done.wait(self.timeout)
        with self._lock:
            if not finished and self._running is done:
                log.warning(
                    "readiness: storage check takes longer than %s s (still running)",
                    self.timeout,
                )
                self._result, self._found_at = TOO_SLOW, self._clock()
            assert self._result is not None
            return self._result

    def _probe(self, done: threading.Event) -> None:
        result = UNREACHABLE
        try:
            try:
                self.storage.check()
            except StorageError as exc:
                log.warning("readiness: storage check failed: %s", exc)
                return
            try:
                self.storage.check_writable()
            except StorageError as exc:
                log.warning("readiness: storage write failed: %s", exc)
                result = UNWRITABLE
                return
            result = OK
        except Exception:  # a bug, not an answer: log it, report the storage failing
            log.exception("readiness: storage check broke")
        finally:
            with self._lock:
                self._result, self._found_at, self._running = result, self._clock(), None
            done.set()


def _storage_probe() -> StorageProbe:
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    probe = app.extensions.get("readiness")
    if probe is None:
        probe = app.extensions.setdefault(
            "readiness",
            StorageProbe(
                app.extensions["storage"],
                float(app.config["READYZ_CACHE_SECONDS"]),
                float(app.config["READYZ_PROBE_TIMEOUT_SECONDS"]),
            ),
        )
    return probe
