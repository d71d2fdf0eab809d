"""Bench-only: takes performance machinery out of a server started by bench/ablation.py.

bench/ablation.py puts this folder on the PYTHONPATH of the server child it starts with
``BENCH_ABLATE=name[,name...]``; Python imports ``sitecustomize`` at start-up, before
``flask serve`` builds the app, so the patches below are in place for the whole process.
Without ``BENCH_ABLATE`` it does nothing. Nothing in the app reads this variable. A switch
whose mechanism the app no longer has stops the server: remove the switch with the mechanism.

- ``presigned``: S3 reads use ``get_object`` (passing on what has arrived with ``read1``,
  as the presigned path does) instead of a presigned GET;
- ``commits``: local files are committed (fsync, rename) before the next file is parsed;
- ``glibc``: no ``mallopt`` tuning (glibc's default mmap threshold and arenas);
- ``citation-style``: the Cite box renders with the Harvard style citeproc-py ships
  (harvard-cite-them-right.csl) instead of the project's compact one, where it is rendered
  (when a record is written, and by a page without a stored citation);
- ``stored-citation``: every page renders its Cite box itself instead of showing the one stored
  when its record was written (used by bench/pages.py, also as
  ``stored-citation,citation-style``);
- ``prepared-read``: no statement is prepared on the server (a landing page's read is planned
  on every execution);
- ``bound-gettext``: the templates' strings go through Flask-Babel's own gettext, which looks
  the catalogue and locale up for each;
- ``translated-templates``: the pages' templates translate their constant strings while a page
  is rendered (Flask's own environment) instead of holding them translated since compiled.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_KNOWN = (
    "presigned",
    "commits",
    "glibc",
    "citation-style",
    "stored-citation",
    "prepared-read",
    "bound-gettext",
    "translated-templates",
)


def _require(owner: object, name: str) -> None:
    if not hasattr(owner, name):
        raise SystemExit(f"ablation shim: {owner!r} has no {name} any more")


def _without_presigned() -> None:
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
        length = int(response["ContentLength"])
        size = length
        content_range = response.get("ContentRange")
        if content_range:
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


def _without_commits() -> None:
    from app.storage.local import LocalStorage

    if not getattr(LocalStorage, "commits_in_background", 0):
        raise SystemExit("ablation shim: LocalStorage commits nothing in the background any more")
    LocalStorage.commits_in_background = 0


def _without_glibc() -> None:
    import app.server

    _require(app.server, "release_freed_memory_to_the_system")
    app.server.release_freed_memory_to_the_system = lambda: None  # type: ignore[assignment]


def _without_citation_style() -> None:
    import citeproc

    import app.pages.citation

    _require(app.pages.citation, "STYLE")
    if app.pages.citation.STYLE.name == "harvard-cite-them-right.csl":
        raise SystemExit("ablation shim: the Cite box has no style of its own any more")
    harvard = Path(citeproc.STYLES_PATH) / "harvard-cite-them-right.csl"
    app.pages.citation.STYLE = harvard  # type: ignore[attr-defined]
    app.pages.citation._style.cache_clear()


def _without_stored_citation() -> None:
    import app.pages.citation

    _require(app.pages.citation, "page_citation")
    _require(app.pages.citation, "formatted_citation")
    citation = app.pages.citation

    def rendered_now(item, stored, language):  # type: ignore[no-untyped-def]
        return citation.formatted_citation(item, language)

    citation.page_citation = rendered_now  # type: ignore[attr-defined]


def _without_prepared_read() -> None:
    import app.database

    _require(app.database, "prepare_marked_statements")
    app.database.prepare_marked_statements = lambda engine: None  # type: ignore[assignment]


def _without_bound_gettext() -> None:
    import app.pages.i18n

    _require(app.pages.i18n, "bound_translations")
    app.pages.i18n.bound_translations = lambda: {}  # type: ignore[assignment]


def _without_translated_templates() -> None:
    import flask

    import app.pages.i18n

    _require(app.pages.i18n, "page_templates")
    app.pages.i18n.page_templates = lambda *args: flask.current_app.jinja_env  # type: ignore[assignment]


def _apply() -> None:
    wanted = [name for name in os.environ.get("BENCH_ABLATE", "").split(",") if name]
    if not wanted:
        return
    unknown = set(wanted) - set(_KNOWN)
    if unknown:
        raise SystemExit(f"BENCH_ABLATE: unknown {sorted(unknown)}; known {_KNOWN}")
    root = str(Path(__file__).resolve().parents[2])
    if root not in sys.path:
        sys.path.insert(0, root)  # the app's package, before `-m flask` adds the cwd
    for name in wanted:
        globals()[f"_without_{name.replace('-', '_')}"]()
    print(f"ablation shim: without {','.join(wanted)}", file=sys.stderr, flush=True)


_apply()
