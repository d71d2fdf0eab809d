"""Bench-only: takes mechanisms out of a server child, the one way benchmarks compare with and
without something (``bench.common.without``, ``app_server(..., without=NAMES)``, the scripts'
``--without NAME``).

The server child gets this folder on its PYTHONPATH and ``BENCH_ABLATE=name[,name...]``;
Python imports ``sitecustomize`` at start-up, before ``flask serve`` builds the app, so the
settings and patches below hold for the whole process, which prints ``ablation shim: without
NAME[,NAME...]`` (checked by bench.common). Nothing in the app reads the variable. A switch
whose mechanism the app no longer has stops the server: remove the switch with the mechanism.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

#: Mechanisms the app turns off by a setting.
SETTINGS = {
    "record-cache": {"RECORD_CACHE_SECONDS": "0"},
    "token-cache": {"TOKEN_CACHE_SECONDS": "0"},
    "stats": {"STATS": "off"},
    "offload": {"DOWNLOAD_OFFLOAD": ""},
    "heavy-gate": {"HEAVY_REQUESTS": "100000"},
}


def _require(owner: object, name: str) -> None:
    if not hasattr(owner, name):
        raise SystemExit(f"ablation shim: {owner!r} has no {name} any more")


def _presigned() -> None:
    """S3 reads use ``get_object`` (passing on what has arrived with ``read1``, as the presigned
    path does) instead of a presigned GET."""
    from botocore.exceptions import BotoCoreError, ClientError

    from app.storage.base import ObjectReader, StorageError
    from app.storage.s3 import S3Storage

    def open_with_get_object(self, key, range_header, start, chunk_size):  # type: ignore[no-untyped-def]
        kwargs = {"Bucket": self.bucket, "Key": key}
        if range_header:
            kwargs["Range"] = range_header
        try:
            response = self.client.get_object(**kwargs)
        except (BotoCoreError, ClientError) as exc:
            raise self._error(exc, "download of", key) from exc
        body = response["Body"]
        length = size = int(response["ContentLength"])
        if content_range := response.get("ContentRange"):
            size = int(content_range.rpartition("/")[2])
        elif range_header:
            body.close()
            raise StorageError(f"S3 ignored the range of s3://{self.bucket}/{key}")
        chunks = self._read1_chunks(body._raw_stream, length, key, chunk_size)
        return ObjectReader(chunks, length, body.close, start=start, size=size)

    _require(S3Storage, "_open_presigned")
    _require(S3Storage, "_open_with_get_object")
    S3Storage._open_presigned = lambda self, *args, **kwargs: None  # type: ignore[method-assign]
    S3Storage._open_with_get_object = open_with_get_object  # type: ignore[method-assign]


def _commits() -> None:
    """Local files are committed (fsync, rename) before the next file is parsed."""
    from app.storage.local import LocalStorage

    if not getattr(LocalStorage, "commits_in_background", 0):
        raise SystemExit("ablation shim: LocalStorage commits nothing in the background any more")
    LocalStorage.commits_in_background = 0


def _glibc() -> None:
    """No ``mallopt`` tuning (glibc's default mmap threshold and arenas)."""
    import app.server

    _require(app.server, "release_freed_memory_to_the_system")
    app.server.release_freed_memory_to_the_system = lambda: None  # type: ignore[assignment]


def _audit_trail() -> None:
    """The audit trail's session listeners are never attached."""
    import app.audit
    import app.audit.trail

    _require(app.audit.trail, "init_app")
    app.audit.trail.init_app = app.audit.init_app = lambda: None  # type: ignore[assignment]


def _stored_citation() -> None:
    """Every page renders its Cite box itself instead of showing the one kept at its write."""
    import app.pages.citation as citation

    _require(citation, "page_citation")
    _require(citation, "formatted_citation")
    citation.page_citation = lambda item, stored, language: citation.formatted_citation(  # type: ignore[attr-defined]
        item, language
    )


def _prepared_read() -> None:
    """No statement is prepared on the server (a page's read is planned at every execution)."""
    import app.database

    _require(app.database, "prepare_marked_statements")
    app.database.prepare_marked_statements = lambda engine: None  # type: ignore[assignment]


def _bound_gettext() -> None:
    """The templates' strings go through Flask-Babel's own gettext (catalogue looked up per
    string)."""
    import app.pages.i18n

    _require(app.pages.i18n, "bound_translations")
    app.pages.i18n.bound_translations = lambda: {}  # type: ignore[assignment]


def _translated_templates() -> None:
    """The pages' templates translate their constant strings while rendering (Flask's own
    environment), not since compiled."""
    import flask

    import app.pages.i18n

    _require(app.pages.i18n, "page_templates")
    app.pages.i18n.page_templates = lambda *args: flask.current_app.jinja_env  # type: ignore[assignment]


#: Mechanisms without a setting: patched away before the app is built.
PATCHES: dict[str, Callable[[], None]] = {
    "presigned": _presigned,
    "commits": _commits,
    "glibc": _glibc,
    "audit-trail": _audit_trail,
    "stored-citation": _stored_citation,
    "prepared-read": _prepared_read,
    "bound-gettext": _bound_gettext,
    "translated-templates": _translated_templates,
}
KNOWN = (*SETTINGS, *PATCHES)


def _apply() -> None:
    wanted = [name for name in os.environ.get("BENCH_ABLATE", "").split(",") if name]
    if not wanted:
        return
    if unknown := set(wanted) - set(KNOWN):
        raise SystemExit(f"BENCH_ABLATE: unknown {sorted(unknown)}; known {KNOWN}")
    root = str(Path(__file__).resolve().parents[2])
    if root not in sys.path:
        sys.path.insert(0, root)  # the app's package, before `-m flask` adds the cwd
    for name in wanted:
        os.environ.update(SETTINGS.get(name, {}))
        PATCHES.get(name, lambda: None)()
    print(f"ablation shim: without {','.join(wanted)}", file=sys.stderr, flush=True)


if __name__ == "sitecustomize":
    _apply()
