"""A record's landing page against the public JSON record at scale (issue 25, item 9).

One PostgreSQL database seeded by bench/seed.py (COPY; 1,000,000 records by default, about a
minute), local storage, one ``flask serve``. Random released records are asked for in the same
rounds, alternating which goes first: ``GET /records/{id}`` (the page) and
``GET /api/public/files/{id}`` (the JSON record, the baseline); server time from the app's
access log (by request id). The seeded rows have no stored content, so a CSV's page finds no
object for its table and goes without it (one failed local open per CSV page).

Targets: p95 of the page <= 2.0 x p95 of the JSON record (issue 34); the page answers with an
ETag and ``Cache-Control: public``, and a conditional GET with that ETag gets 304 with no body.
The database's total size (``pg_database_size``) once set up is reported beside them.

A page renders itself from one read at every view. The app renders a record's citation when
the record is written (app/pages/stored.py); seeded rows are copied in without one, so the
bench renders them with the app's own code for the records it asks for and fills the rest of
`record_citations` with rows of the same size, so that the table and its index have their
full size (those records are never asked for).

Every id is asked for once per server: the pages measured are cold (no cache in front, and
none in the app for pages). ``--without NAME`` (bench/common.py, the one with/without
mechanism of the benches; for pages ``stored-citation``, ``prepared-read``, ``bound-gettext``,
``translated-templates``) adds a server on the same database without that mechanism, asked for
the same ids in the same rounds (servers and page/JSON alternating): its page and ratio beside
the app's, to keep a mechanism only if it pays. The target is the app's.

    .venv/bin/python -m bench.pages                      # 1,000,000 records
    .venv/bin/python -m bench.pages --records 20000      # a quick trial
    .venv/bin/python -m bench.pages --without stored-citation
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import uuid
from typing import Any

from bench.common import (
    Client,
    Report,
    app_server,
    log,
    median,
    migrated_postgres,
    p95,
    print_table,
    without_option,
)
from bench.seed import Seeder

RATIO_TARGET = 2.0


def sample_ids(database_url: str, count: int, seed: int) -> list[str]:
    """`count` released records spread over the table (under embargo too: both answer)."""
    import psycopg

    rnd = random.Random(seed)
    ids: list[str] = []
    with psycopg.connect(database_url) as conn:
        while len(ids) < count:
            row = conn.execute(
                "SELECT id FROM file_records WHERE freigabe AND id > %s ORDER BY id LIMIT 1",
                [uuid.UUID(int=rnd.getrandbits(128))],
            ).fetchone()
            if row:
                ids.append(str(row[0]))
    return ids


def store_citations(database_url: str, env: dict[str, str], ids: list[str]) -> None:
    """What the app stores when it writes a record (its citation, app/pages/stored.py),
    rendered by the app's own code for the records asked for; filler rows of the same size
    for all others, so that the table and its index have their full size."""
    import psycopg

    saved = dict(os.environ)
    os.environ.update(env)
    try:
        from sqlalchemy import select

        from app import create_app
        from app.extensions import db
        from app.models import FileRecord
        from app.pages.stored import citation_row

        app = create_app()
        with app.app_context():
            repository = app.config["REPOSITORY_NAME"]
            wanted = [uuid.UUID(record_id) for record_id in ids]
            records = db.session.scalars(select(FileRecord).where(FileRecord.id.in_(wanted)))
            rows = [citation_row(record, repository) for record in records]
            db.session.remove()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    columns = ("record_id", "key", "de", "en")
    copy_in = f"COPY record_citations ({', '.join(columns)}) FROM STDIN"
    with psycopg.connect(database_url, autocommit=True) as conn:
        with conn.cursor().copy(copy_in) as copy:
            for row in rows:
                copy.write_row([row[name] for name in columns])
        sample = rows[0]
        conn.execute(
            "INSERT INTO record_citations (record_id, key, de, en)"
            " SELECT id, %s, %s, %s FROM file_records WHERE NOT id = ANY(%s)",
            [
                "filler".ljust(32, "-"),
                sample["de"],
                sample["en"],
                [row["record_id"] for row in rows],
            ],
        )
        conn.execute("VACUUM (ANALYZE) record_citations")
        conn.execute("CHECKPOINT")  # the setup's writes reach the disk before the timing


def database_size(database_url: str) -> int:
    """The database's total size in bytes (tables, indexes, TOAST, free space map)."""
    import psycopg

    with psycopg.connect(database_url) as conn:
        return int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])


def measure(clients: list[Client], ids: list[str], warmup: int) -> dict[str, dict[str, Any]]:
    """Per server: page and JSON record of every id, servers and kinds alternating."""
    kinds = {"page": "/records/{}", "json": "/api/public/files/{}"}
    request_ids = {client.server.name: {kind: [] for kind in kinds} for client in clients}
    for index, record_id in enumerate(ids):
        shift = index % len(clients)
        for client in clients[shift:] + clients[:shift]:
            order = list(kinds) if index % 2 == 0 else list(reversed(kinds))
            for kind in order:
                rid, status, _headers, body = client.get(kinds[kind].format(record_id))
                if status != 200:
                    raise RuntimeError(f"{kind} of {record_id} answered {status}: {body[:300]!r}")
                if index >= warmup:
                    request_ids[client.server.name][kind].append(rid)
    results: dict[str, dict[str, Any]] = {}
    for client in clients:
        by_kind = request_ids[client.server.name]
        times = client.server.server_times(rid for rids in by_kind.values() for rid in rids)
        results[client.server.name] = {}
        for kind, rids in by_kind.items():
            server_ms = [times[rid] for rid in rids]
            results[client.server.name][kind] = {
                "requests": len(server_ms),
                "median_ms": median(server_ms),
                "p95_ms": p95(server_ms),
            }
        timed = results[client.server.name]
        timed["ratio_p95"] = timed["page"]["p95_ms"] / timed["json"]["p95_ms"]
    return results


def caching(client: Client, ids: list[str]) -> dict[str, Any]:
    """Every page carries an ETag and the public Cache-Control; the ETag gets a 304."""
    checked = {"pages": 0, "with_etag": 0, "public": 0, "not_modified": 0, "empty_304": 0}
    revalidations: list[str] = []
    cache_control = ""
    for record_id in ids:
        _rid, _status, headers, _body = client.get(f"/records/{record_id}")
        checked["pages"] += 1
        etag = headers.get("ETag")
        cache_control = headers.get("Cache-Control", "")
        checked["public"] += "public" in cache_control.split(", ")
        if not etag:
            continue
        checked["with_etag"] += 1
        rid, status, _headers, body = client.get(f"/records/{record_id}", **{"If-None-Match": etag})
        checked["not_modified"] += status == 304
        checked["empty_304"] += status == 304 and body == b""
        revalidations.append(rid)
    times = client.server.server_times(revalidations)
    checked["cache_control"] = cache_control
    checked["revalidation_p95_ms"] = p95(list(times.values())) if times else None
    return checked


def main() -> None:
    parser = argparse.ArgumentParser(description="Record pages against the JSON record.")
    parser.add_argument("--records", type=int, default=1_000_000, help="records [1,000,000]")
    parser.add_argument("--requests", type=int, default=400, help="timed ids [400]")
    parser.add_argument("--warmup", type=int, default=40, help="unrecorded ids first [40]")
    parser.add_argument("--keep", action="store_true", help="keep the database and work folder")
    without_option(parser, "also a server without this mechanism")
    args = parser.parse_args()
    report = Report("pages", vars(args).copy())
    with contextlib.ExitStack() as stack:
        workdir, database_url, env = migrated_postgres(stack, "pages", args.keep)
        seeder = Seeder(database_url)
        seeder.create_users()
        log(f"seeding {args.records:,} records")
        report.data["seed_seconds"] = seeder.grow_to(args.records)
        ids = sample_ids(database_url, args.warmup + args.requests, seed=25)
        log("  citations of those records, as the app stores them")
        store_citations(database_url, env, ids)
        size = database_size(database_url)
        log(f"  database: {size / 1e9:.2f} GB")
        servers = [app_server("app", env, workdir)]
        stack.callback(lambda: [server.stop() for server in servers])
        for name in args.without:
            servers.append(app_server(f"without-{name}", env, workdir, without=name))
        clients = [Client(server) for server in servers]
        log(f"  {args.requests} random ids, page and JSON record interleaved")
        variants = measure(clients, ids, args.warmup)
        log("  ETag, Cache-Control and 304")
        cached = caching(clients[0], ids[: min(100, len(ids))])
        for client in clients:
            client.close()
    timed = variants.pop("app")
    ratio = timed["ratio_p95"]
    report.data.update(
        {
            "records": args.records,
            "database_bytes": size,
            "timed": timed,
            "without": variants,
            "caching": cached,
        }
    )
    print_table(
        ["server", "GET", "requests", "median ms", "p95 ms", "p95 page / JSON"],
        [
            [name, kind, r["requests"], r["median_ms"], r["p95_ms"], result["ratio_p95"]]
            for name, result in [("app", timed), *variants.items()]
            for kind, r in result.items()
            if kind != "ratio_p95"
        ],
    )
    print(f"caching: {cached}")
    print(f"database size at {args.records:,} records: {size:,} bytes ({size / 1e9:.2f} GB)")
    report.check(f"page p95 / JSON record p95 at {args.records:,}", ratio, RATIO_TARGET, False)
    pages = cached["pages"]
    report.check(
        "pages with an ETag and public Cache-Control",
        min(cached["with_etag"], cached["public"]) / pages,
        1.0,
        True,
    )
    report.check(
        "conditional GETs answered 304 without a body", cached["empty_304"] / pages, 1.0, True
    )
    report.save()


if __name__ == "__main__":
    main()
