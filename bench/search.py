"""Search and harvesting at scale on PostgreSQL (issue 13, item 4).

One database grows through the requested sizes (10k and 1M; bench/seed.py). At each size a
fresh ``flask serve`` answers public two-word searches (relevance order, page 1 with its exact
total) round-robin with the plain public list as the baseline, then a full OAI-PMH
``ListRecords`` harvest following every resumption token. *Selective* queries (a released
record's first title word and case number) pick a few records; *broad* ones ("Klimadaten
berlin", "Pendler Lärm") match thousands at 1M, each ranked and counted.

Targets: every search p95 below 50 ms at the largest size and growth below 3x; harvest pages'
p95 and the median of the last tenth at most 2x the first page's / the first tenth's.

    .venv/bin/python -m bench.search                       # 10k and 1M
    .venv/bin/python -m bench.search --sizes 2000,20000    # a quick trial
"""

from __future__ import annotations

import argparse
import contextlib
import re
import time
import uuid
from typing import Any
from urllib.parse import quote

from bench.common import (
    Client,
    Report,
    app_server,
    log,
    median,
    migrated_postgres,
    p95,
    print_table,
)
from bench.seed import Seeder

# Selective queries are taken from the data at each size (see `selective_queries`).
SELECTIVE = ("title_word_and_case_1", "title_word_and_case_2", "title_word_and_case_3")
BROAD = {
    "station_title": "Klimadaten berlin",
    "two_keywords": "Pendler Lärm",
}
SEARCH_TARGET_MS = 50
GROWTH_TARGET = 3
TOKEN = re.compile(rb"<resumptionToken[^>]*>([^<]+)</resumptionToken>")


def selective_queries(database_url: str) -> dict[str, str]:
    """Two terms as staff type them to find one record: the first word of a released
    record's title and its case number (``Quartalsbericht AKT-2019-0815``), for three
    records spread over the table."""
    import psycopg

    query = (
        "SELECT titel, aktiv_id FROM file_records WHERE freigabe AND aktiv_id IS NOT NULL "
        "AND id > %s ORDER BY id LIMIT 1"
    )
    with psycopg.connect(database_url) as conn:
        rows = [
            conn.execute(query, [uuid.UUID(int=int(fraction * 2**128))]).fetchone()
            for fraction in (0, 0.4, 0.8)
        ]
    return {
        name: f"{titel.split()[0]} {aktiv}"
        for name, (titel, aktiv) in zip(SELECTIVE, rows, strict=True)
    }


def searches(client: Client, requests: int, warmup: int, selective: dict[str, str]) -> dict:
    queries = {**selective, **BROAD}
    urls = {"baseline_list": ("/api/public/files", None)}
    urls |= {name: (f"/api/public/files?q={quote(q)}", None) for name, q in queries.items()}
    results = client.rounds(urls, requests, warmup)
    for name, result in results.items():
        result["query"] = queries.get(name)
    return results


def harvest(client: Client, max_pages: int) -> dict[str, Any]:
    """A full ListRecords harvest (or its first `max_pages` pages)."""
    request_ids: list[str] = []
    records = 0
    began = time.perf_counter()
    url = "/oai?verb=ListRecords&metadataPrefix=oai_dc"
    while True:
        request_id, _, _, body = client.get(url)
        request_ids.append(request_id)
        records += body.count(b"<record>")
        token = TOKEN.search(body)
        if token is None or (max_pages and len(request_ids) >= max_pages):
            break
        url = f"/oai?verb=ListRecords&resumptionToken={quote(token[1].decode())}"
    seconds = time.perf_counter() - began
    times = client.server.server_times(request_ids, timeout=30)
    server_ms = [times[rid] for rid in request_ids if rid in times]
    first, later = server_ms[0], server_ms[1:] or server_ms
    tenth = max(1, len(later) // 10)
    result = {"pages": len(request_ids), "records": records, "records_per_s": records / seconds}
    result["first_ms"] = first
    result |= {"median_ms": median(later), "p95_ms": p95(later), "max_ms": max(later)}
    result |= {"p95_ratio_to_first": p95(later) / first}
    result |= {"last_decile_median_ms": median(later[-tenth:])}
    return result | {"first_decile_median_ms": median(later[:tenth])}


def main() -> None:
    parser = argparse.ArgumentParser(description="Search and OAI-PMH harvesting at scale.")
    parser.add_argument("--sizes", default="10000,1000000", help="record counts")
    parser.add_argument("--requests", type=int, default=30, help="timed requests per query [30]")
    parser.add_argument("--warmup", type=int, default=3, help="unrecorded rounds first [3]")
    parser.add_argument("--harvest-pages", type=int, default=0, help="0 = the whole list [0]")
    parser.add_argument("--keep", action="store_true", help="keep the database and work folder")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    report = Report("search", vars(args).copy())
    levels: dict[str, Any] = {}
    report.data["levels"] = levels
    with contextlib.ExitStack() as stack:
        workdir, database_url, env = migrated_postgres(stack, "search", args.keep)
        seeder = Seeder(database_url)
        seeder.create_users()
        for size in sizes:
            log(f"seeding to {size} records")
            seeder.grow_to(size)
            server = app_server(f"app-{size}", env, workdir)
            try:
                client = Client(server)
                log(f"  {args.requests} rounds of public searches")
                selective = selective_queries(database_url)
                found = searches(client, args.requests, args.warmup, selective)
                log("  ListRecords harvest")
                harvested = harvest(client, args.harvest_pages)
                client.close()
            finally:
                server.stop()
            print_table(
                ["query", "q", "median ms", "p95 ms", "total"],
                [
                    [k, r["query"] or "", r["median_ms"], r["p95_ms"], r["total"]]
                    for k, r in found.items()
                ],
            )
            keys = [
                "pages",
                "records",
                "records_per_s",
                "first_ms",
                "median_ms",
                "p95_ms",
                "max_ms",
            ]
            print_table(["harvest", *keys], [["ListRecords", *(harvested[k] for k in keys)]])
            levels[str(size)] = {"searches": found, "harvest": harvested}
    evaluate(report, sizes, levels)
    report.save()


def evaluate(report: Report, sizes: list[int], levels: dict[str, Any]) -> None:
    small, large = levels[str(sizes[0])], levels[str(sizes[-1])]
    n = f"{sizes[-1]:,}"
    print()
    print_table(
        ["query (p95 ms)", *[f"{s:,}" for s in sizes], "growth", "x baseline list"],
        [
            [
                kind,
                *[levels[str(s)]["searches"][kind]["p95_ms"] for s in sizes],
                large["searches"][kind]["p95_ms"] / small["searches"][kind]["p95_ms"],
                large["searches"][kind]["p95_ms"] / large["searches"]["baseline_list"]["p95_ms"],
            ]
            for kind in large["searches"]
        ],
    )
    for kind in [*SELECTIVE, *BROAD]:
        what = "search" if kind in SELECTIVE else "broad search"
        value = large["searches"][kind]["p95_ms"]
        report.check(f"{what} {kind} p95 at {n}", value, SEARCH_TARGET_MS, False, " ms")
        growth = value / small["searches"][kind]["p95_ms"]
        report.check(f"{what} {kind} growth {sizes[0]:,} -> {n}", growth, GROWTH_TARGET, False, "x")
    for size in sizes:
        h = levels[str(size)]["harvest"]
        last_first = h["last_decile_median_ms"] / h["first_decile_median_ms"]
        at = f"harvest at {size:,}"
        report.check(f"{at}: p95 page / first page", h["p95_ratio_to_first"], 2, False, "x")
        report.check(f"{at}: median of the last tenth / of the first tenth", last_first, 2, False)


if __name__ == "__main__":
    main()
