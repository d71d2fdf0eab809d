"""Making covers, off the request path: the covers' outbox (app/outbox.py, the loop mail and
DOIs share) worked by a thread after each commit that made a cover due, and by `flask covers
make`.

A cover is made from a copy of its source bytes in a private temporary folder, by child.py in
a process of its own: limited in memory (`COVER_MEMORY_MB`) and CPU time, at a lower priority,
killed with everything it started after `COVER_TIMEOUT_SECONDS`, and given no setting or
secret. Whatever a hostile file does there (a PDF that makes the renderer loop, a
decompression bomb, a video ffmpeg cannot read) ends as that cover's failure: one log line,
its reason in `last_error`, the record without a picture, no retry. Storage failures are the
outbox's failed tries, retried with back-off. The pictures are stored under a fresh key
before the row names them; the row is then updated under the record's lock, only if it is
still due under this worker's claim, else the new pictures are deleted again (a write dropped
or re-queued the cover meanwhile).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from flask import Flask, current_app, has_app_context
from sqlalchemy import ColumnElement, event, select
from sqlalchemy.orm import Session

from app.covers import child, services
from app.database import lock_database_on_sqlite
from app.extensions import db
from app.files import deletions
from app.models import Cover, FileRecord, utcnow
from app.outbox import Outbox, OutboxThread, Worked
from app.storage import Storage, StorageError

log = logging.getLogger(__name__)
CHILD = Path(child.__file__)


class RenderFailed(Exception):
    """No picture can be drawn of the bytes (a hostile or broken file, a limit reached)."""


def render(kind: str, source: Path, folder: Path, seconds: int, megabytes: int) -> tuple[int, int]:
    """Draw the pictures of `source` into `folder` in a limited child process (child.py);
    the proportions drawn, or RenderFailed saying why."""
    command = [sys.executable, "-I", str(CHILD), kind, str(source), str(folder)]
    environment = {"PATH": os.defpath, "HOME": str(folder)}
    process = subprocess.Popen(
        [*command, str(seconds), str(megabytes)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=environment,
        cwd=folder,
        start_new_session=True,  # its own process group: a kill takes ffmpeg too
    )
    try:
        out, err = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise RenderFailed(f"took longer than {seconds} s (COVER_TIMEOUT_SECONDS)") from None
    if process.returncode < 0:
        name = signal.Signals(-process.returncode).name
        raise RenderFailed(f"the renderer was ended by {name} (a limit: COVER_MEMORY_MB?)")
    if process.returncode != 0:
        lines = err.decode("utf-8", "replace").strip().splitlines()
        raise RenderFailed(lines[-1] if lines else f"the renderer exited {process.returncode}")
    drawn = json.loads(out)
    return int(drawn["width"]), int(drawn["height"])


def _copy(storage: Storage, key: str, target: Path) -> None:
    reader = storage.open(key)
    try:
        with target.open("wb") as file:
            for chunk in reader:
                file.write(chunk)
    finally:
        reader.close()


def _store(storage: Storage, key: str, folder: Path) -> dict[str, list[Any]]:
    """Store the pictures in `folder` under `key`; name → [size, SHA-256]. On failure none
    stays behind."""
    objects: dict[str, list[Any]] = {}
    tried: list[str] = []
    try:
        for name in child.names():
            data = (folder / name).read_bytes()
            tried.append(f"{key}-{name}")
            with (folder / name).open("rb") as file:
                storage.put(tried[-1], file)
            objects[name] = [len(data), hashlib.sha256(data).hexdigest()]
    except BaseException:
        _remove(storage, tried)
        raise
    return objects


def _remove(storage: Storage, keys: list[str]) -> None:
    for key in keys:
        try:
            storage.delete(key)
        except StorageError:
            log.warning("could not remove picture %s; storage reconcile will", key)


def _claimed(cover_id: int, claim: datetime) -> Cover | None:
    """The cover, under its record's lock, if it is still due under this worker's claim."""
    lock_database_on_sqlite(db.session)
    record_id = db.session.scalar(select(Cover.record_id).where(Cover.id == cover_id))
    if record_id is not None:
        db.session.execute(
            select(FileRecord.id).where(FileRecord.id == record_id).with_for_update()
        )
    cover = db.session.scalars(
        select(Cover).where(Cover.id == cover_id).execution_options(populate_existing=True)
    ).first()
    return cover if cover is not None and cover.due_at == claim else None


def _send(cover: Cover, claim: datetime) -> None:
    storage: Storage = current_app.extensions["storage"]
    config = current_app.config
    cover_id, record_id, kind = cover.id, cover.record_id, services.KINDS.get(cover.source_type)
    with tempfile.TemporaryDirectory(prefix="cover-") as name:
        folder = Path(name)
        source = folder / "source"
        _copy(storage, cover.source_path, source)
        db.session.rollback()  # no transaction stays open while it draws
        try:
            if kind is None:
                raise RenderFailed(f"no picture is drawn of {cover.source_type}")
            size = render(
                kind, source, folder, config["COVER_TIMEOUT_SECONDS"], config["COVER_MEMORY_MB"]
            )
        except RenderFailed as failed:
            _failed(cover_id, claim, str(failed))
            return
        key = services.new_key(record_id)
        objects = _store(storage, key, folder)
    found = _claimed(cover_id, claim)
    if found is None:
        db.session.rollback()
        _remove(storage, [f"{key}-{name}" for name in objects])
        return
    for old in services.picture_keys(found):  # made again (`covers make --all`)
        deletions.owe(old)
    found.key, found.objects = key, json.dumps(objects, sort_keys=True)
    found.width, found.height = size
    found.made_at, found.due_at, found.last_error = utcnow(), None, None
    found.attempts += 1
    owed = deletions.take_owed()
    db.session.commit()
    deletions.carry_out(storage, owed)


def _failed(cover_id: int, claim: datetime, reason: str) -> None:
    """A cover that cannot be drawn: one log line, the reason kept, no retry."""
    found = _claimed(cover_id, claim)
    if found is None:
        db.session.rollback()
        return
    log.warning(
        "cover %s of record %s (%s) not made: %s",
        cover_id,
        found.record_id,
        found.source_type,
        reason,
    )
    found.due_at, found.last_error = None, reason[:1000]
    found.attempts += 1
    db.session.commit()


def _waiting() -> ColumnElement[bool]:
    return Cover.attempts < current_app.config["COVER_MAX_ATTEMPTS"]


OUTBOX = Outbox(
    name="covers",
    model=Cover,
    key=Cover.id,
    due=Cover.due_at,
    send=_send,
    retry="COVER_RETRY_SECONDS",
    waiting=_waiting,
)


def make_due(limit: int = 100) -> Worked:
    """Make the covers that are due (app/outbox.py), one at a time."""
    return OUTBOX.work(limit)


class Maker(OutboxThread):
    """The process's thread that makes due covers after a commit made some due, and when a
    retry falls due: one at a time, so a process never draws more than one picture at once."""

    def __init__(self, app: Flask) -> None:
        super().__init__(app, OUTBOX, make_due)


def _after_commit(session: Session) -> None:
    if session.info.pop(services.DUE, False) and has_app_context():
        maker = current_app.extensions.get("covers.maker")
        if maker is not None:
            maker.poke()


def _forget(session: Session, *_args: Any) -> None:
    session.info.pop(services.DUE, None)


def init_app(app: Flask) -> None:
    if app.config["COVER_BACKGROUND"]:
        app.extensions["covers.maker"] = Maker(app)
    if event.contains(Session, "after_commit", _after_commit):
        return
    event.listen(Session, "after_commit", _after_commit)
    event.listen(Session, "after_rollback", _forget)
