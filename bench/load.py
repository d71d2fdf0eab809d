"""Load under real traffic (issue 48 items 1-2), and lists, search and harvests at scale (the
former bench.lists and bench.search: issue 6 item 6, issue 13).

The app from this checkout (``flask serve``; SQLite and local storage, or ``--postgres --s3``:
PostgreSQL and SeaweedFS), the records grown through ``--records`` (bench/seed.py) plus one
uploaded file for the Range class. At every size, by the app's access-log ``duration_ms``
(``Client.rounds``): the lists of the API (admin's first page, path + ``freigabe``, public,
the heaviest user's own), public searches (three selective ones from the data, two broad),
keyset pages followed through ``--walk-pages`` per list, and an OAI-PMH ``ListRecords``
harvest through every resumption token. At the largest size ``wrk`` (Debian's; a Lua script
whose ``done`` prints its latency percentiles) loads each class of request alone (2 threads,
16 connections, ``--duration``), then the mix of the issue, then the harvester scenario:
landing pages from 8 connections alone, and beside a second wrk from 16 connections walking
``ListRecords`` and list pages, honouring ``Retry-After`` as harvesters do. ``--processes N``
serves with ``SERVER_PROCESSES=N``; ``--compare-processes`` repeats the wrk part on 1 and on as
many processes as cores.

Targets: mix >= 0.5 of /healthz answers/s; lists, OAI, search and front page cost <= 3x the
JSON record; beside the harvester landing pages keep p95 <= 1.5x and answers/s >= 0.7x of
quiet; with as many processes as cores (2 here) the mix >= 1.6x of one process. At the
largest size: list medians <= 50 ms (the user's own 15 ms), keyset pages' p95 <= 15 ms,
searches' p95 <= 50 ms, growth <= 3x from the smallest size; harvest pages' p95 <= 2x the
first page, the last tenth's median <= 2x the first tenth's.

    .venv/bin/python -m bench.load                                          # 300 records
    .venv/bin/python -m bench.load --postgres --s3 --records 10000,1000000   # production shape
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bench.common import (
    Client,
    Postgres,
    Report,
    app_env,
    app_server,
    curl,
    flask_cli,
    log,
    login,
    make_user,
    median,
    p95,
    prepare_database,
    print_table,
    s3_client,
    s3_settings,
    sqlalchemy_url,
    sqlite_env,
    start_s3,
    workspace,
)
from bench.seed import Seeder, seed_orm

ADMIN, USER_PASSWORD = ("bench-admin@example.org", "bench admin password 1234"), "bench pw 1234"
OAI = "/oai?verb=ListRecords&metadataPrefix=oai_dc"
TOKEN = re.compile(r"<resumptionToken[^>]*>([^<]+)</resumptionToken>")
#: The issue's mix: share of the requests per class.
MIX = {"page": 40, "json": 20, "list": 10, "range": 10, "oai": 5, "oai_token": 5}
MIX |= {"search": 5, "front": 5}
LISTS = {"admin_all": ("/api/files", "admin"), "user_own": ("/api/files", "user"),
         "admin_path_freigabe": ("/api/files?path=reports/2019&freigabe=1", "admin"),
         "public": ("/api/public/files", None)}  # fmt: skip
HEAVIEST = ("SELECT u.email FROM file_records f JOIN users u ON u.id = f.user_id "
            "GROUP BY u.email ORDER BY count(*) DESC LIMIT 1")  # fmt: skip
BROAD = {"station_title": "Klimadaten berlin", "two_keywords": "Pendler Lärm"}
LUA = """local paths, headers = {%s}, {%s}
local n, i, wait = #paths, 0, 0
init = function(args) i = math.random(n) end
request = function() i = i %% n + 1; return wrk.format("GET", paths[i], headers[i]) end
done = function(s, latency, r)
  local e = s.errors
  io.write(string.format('{"requests": %%d, "us": %%d, "bad": %%d, "socket": %%d, ' ..
    '"p50": %%.0f, "p95": %%.0f, "p99": %%.0f}\\n', s.requests, s.duration, e.status,
    e.connect + e.read + e.write + e.timeout, latency:percentile(50), latency:percentile(95),
    latency:percentile(99)))
end
"""
#: A harvester waits as long as a 429 or 503 asks it to before its connection asks again
#: (``response`` runs just before ``delay`` for the same connection).
POLITE = """response = function(status, h, body)
  if status == 429 or status == 503 then wait = 1000 * (tonumber(h["Retry-After"]) or 1) end
end
delay = function() local w = wait; wait = 0; return w end
"""


def wrk(base_url: str, requests: list[tuple[str, dict]], seconds: int, workdir: Path,
        connections: int = 16, polite: bool = False) -> subprocess.Popen:  # fmt: skip
    """A wrk process cycling through ``requests`` (path, headers) from a random start."""
    paths = ", ".join(json.dumps(path) for path, _ in requests)
    headers = ", ".join(
        "{" + ", ".join(f"[{json.dumps(k)}] = {json.dumps(v)}" for k, v in h.items()) + "}"
        for _, h in requests
    )
    script = workdir / f"wrk-{uuid.uuid4().hex[:8]}.lua"
    script.write_text(LUA % (paths, headers) + (POLITE if polite else ""))
    threads = min(2, connections)
    command = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "-s", str(script)]
    return subprocess.Popen([*command, base_url], stdout=subprocess.PIPE, text=True)


def result(process: subprocess.Popen) -> dict[str, float]:
    """Answers/s (all, and below 400), p50/p95/p99 in ms, error counts of a wrk process."""
    out, _ = process.communicate(timeout=600)
    line = next((line for line in out.splitlines() if line.startswith('{"requests"')), None)
    if process.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed: {out[-2000:]}")
    raw = json.loads(line)
    seconds = raw["us"] / 1e6
    figures = {f"p{p}_ms": raw[f"p{p}"] / 1000 for p in (50, 95, 99)}
    figures |= {
        "rps": raw["requests"] / seconds,
        "ok_rps": (raw["requests"] - raw["bad"]) / seconds,
    }
    return figures | {"refused": raw["bad"], "socket_errors": raw["socket"]}


def measure(
    server: Any, requests: list[tuple[str, dict]], seconds: int, workdir: Path, **kw: Any
) -> dict:
    figures = result(wrk(server.base_url, requests, seconds, workdir, **kw))
    if figures["refused"] or figures["socket_errors"]:
        log(f"  {figures['refused']} answers >= 400, {figures['socket_errors']} socket errors")
    return figures


# --- the stack, its records and the requests of each class -------------------------------


def stack_env(stack: contextlib.ExitStack, args: argparse.Namespace) -> tuple[Path, str, dict]:
    """Work folder, database URL and the app's settings of the stack asked for, migrated."""
    workdir = stack.enter_context(workspace("load", keep=args.keep))
    storage = {"STORAGE_BACKEND": "local", "STORAGE_LOCAL_ROOT": str(workdir / "storage")}
    if args.s3:
        s3 = start_s3(workdir)
        stack.callback(s3.stop)
        bucket = f"bench-{uuid.uuid4().hex[:12]}"
        s3_client(s3).create_bucket(Bucket=bucket)
        storage = s3_settings(s3, bucket)
    if args.postgres:
        postgres = Postgres()
        if not args.keep:
            stack.callback(postgres.drop_all)
        url = postgres.create("bench_load")
        env = app_env(url, storage, workdir / "app-tmp")
    else:
        env = sqlite_env(workdir) | storage
        url = env["DATABASE_URL"]
    prepare_database(env)
    return workdir, url, env | {"RATELIMIT_WRITES": "100000 per minute"}


def grow(args: argparse.Namespace, url: str, env: dict, size: int, seeder: Any) -> None:
    if args.postgres:
        seeder.grow_to(size)
        flask_cli("pages", "refresh-citations", env=env)  # as the app's writes leave them
        return
    from app import create_app

    seed_orm(create_app({"SQLALCHEMY_DATABASE_URI": url, "STORAGE_BACKEND": "local",
                         "STORAGE_LOCAL_ROOT": env["STORAGE_LOCAL_ROOT"]}), size)  # fmt: skip


def query(url: str, sql: str, **params: Any) -> list[Any]:
    from sqlalchemy import create_engine, text

    engine = create_engine(sqlalchemy_url(url))
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(sql), params))
    finally:
        engine.dispose()


def released_ids(url: str, count: int) -> list[str]:
    rows = query(url, "SELECT id FROM file_records WHERE freigabe AND (sperrfrist IS NULL OR "
                 "sperrfrist <= CURRENT_DATE) ORDER BY random() LIMIT :n", n=count)  # fmt: skip
    return [str(uuid.UUID(str(row[0]))) for row in rows]


def selective_queries(url: str) -> dict[str, str]:
    """The first title word and case number of three released records spread over the table,
    as staff type them to find one record."""
    (total,) = query(url, "SELECT count(*) FROM file_records")[0]
    sql = ("SELECT titel, aktiv_id FROM file_records WHERE freigabe AND aktiv_id IS NOT NULL "
           "ORDER BY id LIMIT 1 OFFSET :k")  # fmt: skip
    rows = [query(url, sql, k=int(total * f * 0.7))[0] for f in (0, 0.4, 0.8)]
    return {f"selective_{i}": f"{t.split()[0]} {a}" for i, (t, a) in enumerate(rows, 1)}


def upload(server: Any, token: str, workdir: Path) -> str:
    """A released CSV of 64 KiB, for the Range class (seeded records have no stored bytes)."""
    sample, out = workdir / "sample.csv", workdir / "created.json"
    sample.write_text("jahr;wert\n" + "".join(f"{2000 + i % 25};{i}\n" for i in range(7000)))
    form = ["-H", f"Authorization: Bearer {token}", "-F", f"files[]=@{sample}", "-F", "titel=Werte"]
    curl([*form, "-o", str(out), f"{server.base_url}/api/files"])
    return json.loads(out.read_text())["files"][0]["id"]


def oai_pages(client: Client, pages: int) -> list[str]:
    """The first ``pages`` ListRecords URLs of a harvest (first page, then its tokens)."""
    urls = [OAI]
    while len(urls) < pages:
        token = TOKEN.search(client.get(urls[-1])[3].decode())
        if not token:
            break
        urls.append(f"/oai?verb=ListRecords&resumptionToken={quote(token[1])}")
    return urls


def classes(ids: list[str], file_id: str, oai: list[str], lists: int) -> dict[str, list]:
    one = {}
    return {
        "healthz": [("/healthz", one)],
        "json": [(f"/api/public/files/{i}", one) for i in ids],
        "range": [(f"/api/public/files/{file_id}/download", {"Range": "bytes=1024-2047"})],
        "page": [(f"/records/{i}", one) for i in ids],
        "front": [("/", one)],
        "list": [("/api/public/files?page=2", one)],
        "search": [("/search?q=Bericht", one)],
        "oai": [(oai[0], one)],
        "oai_token": [(url, one) for url in oai[1:2] or oai[:1]],
        "harvester": [(url, one) for url in oai]
        + [(f"/api/public/files?page={p}", one) for p in range(1, lists + 1)],  # fmt: skip
    }


def mixed(requests: dict[str, list]) -> list[tuple[str, dict]]:
    rnd = random.Random(48)
    mix = [rnd.choice(requests[name]) for name, share in MIX.items() for _ in range(4 * share)]
    rnd.shuffle(mix)
    return mix


# --- server times at each size (formerly bench.lists and bench.search) ------------------


def walk(client: Client, who: str | None, url: str, pages: int) -> dict[str, Any]:
    """Follow ``next_cursor`` from the first keyset page; order and duplicates checked."""
    sep, ids, seen, last, problems = "&" if "?" in url else "?", [], set(), None, []
    cursor: str | None = ""
    while cursor is not None and (not pages or len(ids) < pages):
        request_id, _, _, data = client.get(f"{url}{sep}cursor={quote(cursor)}", who)
        body = json.loads(data)
        ids.append(request_id)
        for item in body["data"]:
            key = (item["created_at"], item["id"])
            problems += [key] if item["id"] in seen or (last and key > last) else []
            seen.add(item["id"])
            last = key
        cursor = body.get("next_cursor")
    ms = list(client.server.server_times(ids).values())
    return {"pages": len(ids), "median_ms": median(ms), "p95_ms": p95(ms), "problems": problems[:5]}


def harvest(client: Client, max_pages: int) -> dict[str, Any]:
    """ListRecords through every resumption token: each page's server time against the first."""
    ids, records, url = [], 0, OAI
    while url:
        request_id, _, _, body = client.get(url)
        ids.append(request_id)
        records += body.count(b"<record>")
        token = TOKEN.search(body.decode())
        more = token and (not max_pages or len(ids) < max_pages)
        url = f"/oai?verb=ListRecords&resumptionToken={quote(token[1])}" if more else ""
    times = client.server.server_times(ids, timeout=30)
    ms = [times[i] for i in ids if i in times]
    later = ms[1:] or ms
    tenth = max(1, len(later) // 10)
    return {"pages": len(ids), "records": records, "first_ms": ms[0], "p95_ms": p95(later),
            "p95_to_first": p95(later) / ms[0],
            "last_to_first_tenth": median(later[-tenth:]) / median(later[:tenth])}  # fmt: skip


def server_times(server: Any, tokens: dict, url: str, args: argparse.Namespace) -> dict:
    client = Client(server, tokens)
    searches = selective_queries(url) | BROAD
    urls = {kind: (path, who) for kind, (path, who) in LISTS.items()}
    urls |= {name: (f"/api/public/files?q={quote(q)}", None) for name, q in searches.items()}
    rounds = client.rounds(urls, args.requests, args.warmup)
    keyset = {kind: walk(client, who, path, 0 if kind == "user_own" else args.walk_pages)
              for kind, (path, who) in LISTS.items()}  # fmt: skip
    harvested = harvest(client, args.harvest_pages)
    client.close()
    rows = [
        [k, searches.get(k, ""), r["median_ms"], r["p95_ms"], r["total"]] for k, r in rounds.items()
    ]
    rows += [
        [f"keyset {k}", f"{w['pages']} pages", w["median_ms"], w["p95_ms"], ""]
        for k, w in keyset.items()
    ]
    rows += [
        [
            "ListRecords",
            f"{harvested['pages']} pages",
            harvested["first_ms"],
            harvested["p95_ms"],
            harvested["records"],
        ]
    ]
    print_table(["server time", "query", "median ms", "p95 ms", "total"], rows)
    return {"rounds": rounds, "keyset": keyset, "harvest": harvested, "queries": searches}


# --- main -------------------------------------------------------------------------------


def load(server: Any, requests: dict[str, list], args: argparse.Namespace, workdir: Path) -> dict:
    """Each class alone, the mix, and the harvester scenario, on one server."""
    figures: dict[str, Any] = {}
    measure(server, mixed(requests), 3, workdir)  # warm-up
    for name in [*MIX, "healthz"]:
        figures[name] = measure(server, requests[name], args.duration, workdir)
        log(f"  {name}: {figures[name]['rps']:.0f}/s, p95 {figures[name]['p95_ms']:.1f} ms")
    figures["mix"] = measure(server, mixed(requests), args.duration, workdir)
    log(f"  mix: {figures['mix']['rps']:.0f}/s, p95 {figures['mix']['p95_ms']:.1f} ms")
    figures["quiet"] = measure(server, requests["page"], args.duration, workdir, connections=8)
    harvester = wrk(server.base_url, requests["harvester"], args.duration, workdir, polite=True)
    figures["beside"] = measure(server, requests["page"], args.duration, workdir, connections=8)
    figures["harvester"] = result(harvester)
    for name in ("quiet", "beside", "harvester"):
        f = figures[name]
        log(f"  pages {name}: {f['ok_rps']:.0f}/s below 400, p95 {f['p95_ms']:.1f} ms")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description="Load per class, mix, harvester; lists at scale.")
    parser.add_argument("--records", default="300", help="sizes to grow through [300]")
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL, not SQLite")
    parser.add_argument("--s3", action="store_true", help="S3 (SeaweedFS), not a local folder")
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run [10]")
    parser.add_argument("--processes", type=int, help="SERVER_PROCESSES of the server")
    parser.add_argument("--compare-processes", action="store_true",
                        help=f"load 1 and {os.cpu_count()} processes")  # fmt: skip
    parser.add_argument("--requests", type=int, default=30, help="timed rounds per list [30]")
    parser.add_argument("--warmup", type=int, default=3, help="unrecorded rounds first [3]")
    parser.add_argument("--walk-pages", type=int, default=200, help="keyset pages, 0: all [200]")
    parser.add_argument("--harvest-pages", type=int, default=0, help="0: the whole list [0]")
    parser.add_argument("--keep", action="store_true", help="keep the database and work folder")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.records.split(","))
    report = Report("load", vars(args).copy())
    data: dict[str, Any] = {"sizes": {}, "load": {}, "uptime": []}
    report.data = data
    with contextlib.ExitStack() as stack:
        workdir, url, env = stack_env(stack, args)
        make_user(env, *ADMIN, admin=True)
        seeder = Seeder(url) if args.postgres else None
        if seeder:
            seeder.create_users()
        for size in sizes:
            log(f"growing to {size:,} records")
            began = time.perf_counter()
            grow(args, url, env, size, seeder)
            log(f"  {time.perf_counter() - began:.1f} s")
            (heaviest,) = query(url, HEAVIEST)[0]
            flask_cli("users", "set-password", heaviest, "--password", USER_PASSWORD, env=env)
            server = app_server(f"app-{size}", env, workdir)
            try:
                tokens = {"admin": login(server.port, *ADMIN)}
                tokens["user"] = login(server.port, heaviest, USER_PASSWORD)
                data["sizes"][size] = server_times(server, tokens, url, args)
                file_id = upload(server, tokens["admin"], workdir) if size == sizes[-1] else ""
                oai = oai_pages(Client(server), 10)
            finally:
                server.stop()
        requests = classes(released_ids(url, 200), file_id, oai, lists=20)
        counts = [1, os.cpu_count() or 1] if args.compare_processes else [args.processes]
        for n in counts:
            server_env = env | ({"SERVER_PROCESSES": str(n)} if n else {})
            server = app_server(f"app-load-{n}", server_env, workdir)
            log(f"wrk on {n or 'default'} processes ({os.getloadavg()[0]:.1f} load)")
            try:
                data["load"][n or "default"] = load(server, requests, args, workdir)
            finally:
                server.stop()
            data["uptime"].append(
                subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
            )
    evaluate(report, sizes, data)
    report.save()


def evaluate(report: Report, sizes: list[int], data: dict) -> None:
    runs = data["load"]
    for n, figures in runs.items():
        print(f"\nwrk, {n} processes, {sizes[-1]:,} records ({data['uptime'][0]})")
        rows = [
            [name, f["rps"], f["ok_rps"], f["p50_ms"], f["p95_ms"], f["p99_ms"]]
            for name, f in figures.items()
        ]
        print_table(["class", "answers/s", "below 400/s", "p50 ms", "p95 ms", "p99 ms"], rows)
        at = f"({n} processes)"
        report.check(
            f"mix / healthz answers/s {at}",
            figures["mix"]["rps"] / figures["healthz"]["rps"],
            0.5,
            True,
        )
        for name in ("list", "oai", "oai_token", "search", "front"):
            cost = figures["json"]["rps"] / figures[name]["rps"]
            report.check(f"{name} cost / JSON record cost {at}", cost, 3, False, "x")
        quiet, beside = figures["quiet"], figures["beside"]
        report.check(
            f"pages p95 beside a harvester / quiet {at}",
            beside["p95_ms"] / quiet["p95_ms"],
            1.5,
            False,
            "x",
        )
        report.check(
            f"pages answers/s beside a harvester / quiet {at}",
            beside["ok_rps"] / quiet["ok_rps"],
            0.7,
            True,
        )
    if len(runs) == 2:
        one, many = runs.values()
        report.check(
            f"mix answers/s, {list(runs)[1]} processes / 1",
            many["mix"]["rps"] / one["mix"]["rps"],
            1.6,
            True,
        )
    large, small, n = data["sizes"][sizes[-1]], data["sizes"][sizes[0]], f"{sizes[-1]:,}"
    for kind, r in large["rounds"].items():
        search = kind not in LISTS
        value = r["p95_ms"] if search else r["median_ms"]
        limit = 50 if search or kind != "user_own" else 15
        report.check(
            f"{kind} {'p95' if search else 'median'} server time at {n}", value, limit, False, " ms"
        )
        if len(sizes) > 1:
            before = small["rounds"][kind]["p95_ms" if search else "median_ms"]
            report.check(f"{kind} growth {sizes[0]:,} -> {n}", value / before, 3, False, "x")
    for kind, walked in large["keyset"].items():
        report.check(
            f"keyset {kind}: p95 of {walked['pages']} pages at {n}",
            walked["p95_ms"],
            15,
            False,
            " ms",
        )
        if walked["problems"]:
            print(f"WARN  keyset {kind}: order or duplicates {walked['problems']}")
    harvested = large["harvest"]
    report.check(f"harvest at {n}: p95 page / first page", harvested["p95_to_first"], 2, False, "x")
    report.check(
        f"harvest at {n}: last tenth / first tenth", harvested["last_to_first_tenth"], 2, False, "x"
    )


if __name__ == "__main__":
    main()
