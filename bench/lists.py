"""List endpoints at scale: server time against the number of records (issue item 6).

One PostgreSQL database grows through the requested sizes (10k, 100k, 1M; bench/seed.py). At
each size a fresh ``flask serve`` answers the administrator's first page (``admin_all``), path
prefix and release filter (``admin_path_freigabe``), the public list (``public``) and the own
list of the user who owns the most (``user_own``), round-robin; then ``next_cursor`` is
followed through ``--walk-pages`` keyset pages of each list (``user_own`` all the way),
checking order and duplicates. Server time is the access log's ``duration_ms`` by request id.
The app's SQL, caught in-process (``before_cursor_execute`` while the requests are replayed
with the Flask test client), runs under ``EXPLAIN (ANALYZE, BUFFERS)``.

Targets at the largest size: median below 50 ms (``user_own``: 15 ms) and growth at most 3x
from the smallest; keyset pages' p95 below 15 ms; every plan uses an index.

    .venv/bin/python -m bench.lists                                    # 10k, 100k, 1M
    .venv/bin/python -m bench.lists --sizes 2000,10000 --requests 15   # a quick trial
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bench.common import (
    Client,
    Report,
    app_server,
    flask_cli,
    log,
    login,
    make_user,
    median,
    migrated_postgres,
    p95,
    print_table,
)
from bench.seed import Seeder

ADMIN_EMAIL, ADMIN_PASSWORD = "bench-admin@example.org", "bench admin password 1234"
USER_PASSWORD = "bench user password 1234"
PATH_FILTER = "reports/2019"
KINDS = {
    "admin_all": ("admin", "/api/files"),
    "admin_path_freigabe": ("admin", f"/api/files?path={PATH_FILTER}&freigabe=1"),
    "public": (None, "/api/public/files"),
    "user_own": ("user", "/api/files"),
}
TARGET_MS = {"admin_all": 50, "admin_path_freigabe": 50, "public": 50, "user_own": 15}
KEYSET_TARGET_MS = 15


def walk(client: Client, who: str | None, url: str, pages: int) -> dict[str, Any]:
    """Follow ``next_cursor`` from the first page, checking the order (newest first) and that
    no record comes twice."""
    separator = "&" if "?" in url else "?"
    # An empty cursor asks for the first keyset page (no total).
    request_id, _, _, data = client.get(f"{url}{separator}cursor=", who)
    body = json.loads(data)
    if "next_cursor" not in body:
        raise RuntimeError(f"{url}: no next_cursor in the envelope of a keyset page")
    page_ids = [request_id]
    seen: set[str] = set()
    last: tuple[str, str] | None = None
    problems: list[str] = []
    cursors: list[str] = []
    while True:
        for item in body["data"]:
            key = (item["created_at"], item["id"])
            if item["id"] in seen:
                problems.append(f"record {item['id']} twice")
            if last is not None and key > last:
                problems.append(f"order broken at {key}")
            seen.add(item["id"])
            last = key
        cursor = body.get("next_cursor")
        if not cursor or (pages and len(page_ids) >= pages):
            break
        cursors.append(cursor)
        request_id, _, _, data = client.get(f"{url}{separator}cursor={quote(cursor)}", who)
        body = json.loads(data)
        page_ids.append(request_id)
    times = client.server.server_times(page_ids)
    server_ms = [times[rid] for rid in page_ids if rid in times]
    result = {"pages": len(page_ids), "records": len(seen), "server_ms": server_ms}
    result |= {"median_ms": median(server_ms), "p95_ms": p95(server_ms), "max_ms": max(server_ms)}
    sample = cursors[len(cursors) // 2] if cursors else None
    return result | {"problems": problems[:5], "sample_cursor": sample}


# --- the app's SQL and its plans --------------------------------------------------------


def capture_sql(
    database_url: str, workdir: Path, requests: list[tuple[str, str | None, str]], tokens: dict
) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """The statements on file_records that the app issues for each (label, who, url)."""
    from sqlalchemy import event

    from app import create_app
    from app.extensions import db
    from bench.common import sqlalchemy_url

    app = create_app(
        {
            "SQLALCHEMY_DATABASE_URI": sqlalchemy_url(database_url),
            "STORAGE_BACKEND": "local",
            "STORAGE_LOCAL_ROOT": str(workdir / "unused-storage"),
            "RATELIMIT_ENABLED": False,
        }
    )
    logging.getLogger("app.access").setLevel(logging.WARNING)
    captured: list[tuple[str, dict[str, Any]]] = []

    def on_execute(conn, cursor, statement, parameters, context, executemany):
        head = statement.lstrip().upper()
        reads = "file_records" in statement or "file_path_counts" in statement
        if reads and head.startswith(("SELECT", "WITH")):
            captured.append((statement, dict(parameters or {})))

    found: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    with app.app_context():
        engine = db.engine
    event.listen(engine, "before_cursor_execute", on_execute)
    # No app context around the requests: each request gets its own (and its own `g`).
    client = app.test_client()
    try:
        for label, who, url in requests:
            captured.clear()
            headers = {"Authorization": f"Bearer {tokens[who]}"} if who else {}
            response = client.get(url, headers=headers)
            if response.status_code != 200:
                raise RuntimeError(f"in-process GET {url}: {response.status_code}")
            found[label] = list(captured)
    finally:
        event.remove(engine, "before_cursor_execute", on_execute)
        engine.dispose()
    return found


def explain(database_url: str, statements: list[tuple[str, dict[str, Any]]]) -> list[dict]:
    """``EXPLAIN (ANALYZE, BUFFERS)`` of each statement with its parameters."""
    import psycopg

    plans = []
    with psycopg.connect(database_url, autocommit=True) as conn:
        for statement, params in statements:
            rows = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + statement, params).fetchall()
            plan = "\n".join(row[0] for row in rows)
            params = {k: str(v) for k, v in params.items()}
            plans.append({"sql": statement, "params": params, "plan": plan})
            plans[-1] |= {"execution_ms": _execution_ms(plan), "uses_index": _uses_index(plan)}
    return plans


def _execution_ms(plan: str) -> float | None:
    match = re.search(r"Execution Time: ([\d.]+) ms", plan)
    return float(match[1]) if match else None


def _uses_index(plan: str) -> bool:
    """No sequential scan of file_records, and an index wherever file_records is read.

    A statement on the folder counts alone (a few rows per folder) may scan them.
    """
    if "Seq Scan on file_records" in plan:
        return False
    return "Index" in plan or " on file_records" not in plan


# --- main -------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description="List latency against the number of records.")
    parser.add_argument("--sizes", default="10000,100000,1000000", help="record counts")
    parser.add_argument("--users", type=int, default=1000, help="owners of the records [1000]")
    parser.add_argument("--requests", type=int, default=30, help="timed requests per kind [30]")
    parser.add_argument("--warmup", type=int, default=5, help="unrecorded rounds first [5]")
    parser.add_argument(
        "--walk-pages", type=int, default=200, help="keyset pages per list, 0 = all [200]"
    )
    parser.add_argument("--keep", action="store_true", help="keep the database and work folder")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    report = Report("lists", vars(args).copy())

    with contextlib.ExitStack() as stack:
        workdir, database_url, env = migrated_postgres(stack, "lists", args.keep)
        log(f"database {database_url}")
        make_user(env, ADMIN_EMAIL, ADMIN_PASSWORD, admin=True)
        seeder = Seeder(database_url, users=args.users)
        seeder.create_users()
        levels: dict[str, Any] = {}
        report.data["levels"] = levels
        heavy_email = None
        for size in sizes:
            log(f"seeding to {size} records")
            began = time.perf_counter()
            timings = seeder.grow_to(size)
            seconds = time.perf_counter() - began
            log(f"  {seconds:.1f} s ({', '.join(f'{k} {v:.1f} s' for k, v in timings.items())})")
            email, _owned = seeder.heaviest_user()
            if email != heavy_email:
                flask_cli("users", "set-password", email, "--password", USER_PASSWORD, env=env)
                heavy_email = email
            server = app_server(f"app-{size}", env, workdir)
            try:
                tokens = {
                    "admin": login(server.port, ADMIN_EMAIL, ADMIN_PASSWORD),
                    "user": login(server.port, email, USER_PASSWORD),
                }
                client = Client(server, tokens)
                log(f"  {args.requests} requests per list kind")
                urls = {kind: (url, who) for kind, (who, url) in KINDS.items()}
                results = client.rounds(urls, args.requests, args.warmup)
                keyset = {}
                for kind, (who, url) in KINDS.items():
                    pages = 0 if kind == "user_own" else args.walk_pages
                    keyset[kind] = walk(client, who, url, pages)
                client.close()
            finally:
                server.stop()
            rows = [[kind, r["median_ms"], "", r["total"]] for kind, r in results.items()]
            rows += [
                [f"keyset {kind} ({w['pages']} pages)", w["median_ms"], w["p95_ms"], w["max_ms"]]
                for kind, w in keyset.items()
            ]
            print_table(["list", "server ms (median)", "p95", "total / max"], rows)
            log("  EXPLAIN ANALYZE of the app's statements")
            to_explain = [(kind, who, url) for kind, (who, url) in KINDS.items()]
            for kind, walked in keyset.items():
                if walked["sample_cursor"]:
                    who, url = KINDS[kind]
                    separator = "&" if "?" in url else "?"
                    cursor_url = f"{url}{separator}cursor={quote(walked['sample_cursor'])}"
                    to_explain.append((f"keyset_{kind}", who, cursor_url))
            statements = capture_sql(database_url, workdir, to_explain, tokens)
            plans = {label: explain(database_url, found) for label, found in statements.items()}
            for label, found in plans.items():
                ms = [
                    f"{p['execution_ms']} ms{'' if p['uses_index'] else ' NO INDEX'}" for p in found
                ]
                print(f"    {label}: {', '.join(ms)}")
            levels[str(size)] = {"records": size, "seed_seconds": seconds, "seed_timings": timings}
            levels[str(size)] |= {"lists": results, "keyset": keyset, "plans": plans}
        if args.keep:
            log(f"database kept: {database_url}")
    evaluate(report, sizes, levels)
    report.save()


def evaluate(report: Report, sizes: list[int], levels: dict[str, Any]) -> None:
    large, n = levels[str(sizes[-1])], f"{sizes[-1]:,}"
    print()
    medians = {k: [levels[str(s)]["lists"][k]["median_ms"] for s in sizes] for k in KINDS}
    print_table(
        ["list", *[f"{s:,}" for s in sizes], "growth"],
        [[kind, *values, values[-1] / values[0]] for kind, values in medians.items()],
    )
    for kind, limit in TARGET_MS.items():
        value = medians[kind][-1]
        report.check(f"{kind} median server time at {n} records", value, limit, False, " ms")
        if len(sizes) > 1:
            growth = value / medians[kind][0]
            report.check(f"{kind} growth {sizes[0]:,} -> {n}", growth, 3, False, "x")
    for kind, walked in large["keyset"].items():
        label = f"keyset {kind}: p95 of {walked['pages']} pages at {n}"
        report.check(label, walked["p95_ms"], KEYSET_TARGET_MS, False, " ms")
        if walked["problems"]:
            print(f"WARN  keyset {kind}: {walked['problems']}")
    for label, plans in large["plans"].items():
        indexed = float(all(p["uses_index"] for p in plans))
        report.check(f"EXPLAIN {label}: every statement uses an index", indexed, 1, True)


if __name__ == "__main__":
    main()
