"""Load under real traffic (issue 48 items 1-2); the former bench.metadata, bench.lists and
bench.search (issue items 5 and 6, issue 13). What it does and its targets: bench/README.md.

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
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bench import common as c
from bench.seed import Seeder, seed_orm

ADMIN, USER_PASSWORD = ("bench-admin@example.org", "bench admin password 1234"), "bench pw 1234"
OAI = "/oai?verb=ListRecords&metadataPrefix=oai_dc"
TOKEN = re.compile(r"<resumptionToken[^>]*>([^<]+)</resumptionToken>")
#: The issue's mix: per cent of the requests per class.
MIX = {"page": 40, "json": 20, "list": 10, "range": 10, "oai": 5, "oai_token": 5, "search": 5}
MIX |= {"front": 5}
LISTS = {"admin_all": ("/api/files", "admin"), "user_own": ("/api/files", "user"),
         "admin_path_freigabe": ("/api/files?path=reports/2019&freigabe=1", "admin"),
         "public": ("/api/public/files", None)}  # fmt: skip
BROAD = {"station_title": "Klimadaten berlin", "two_keywords": "Pendler Lärm"}
HEAVIEST = ("SELECT u.email FROM file_records f JOIN users u ON u.id = f.user_id "
            "GROUP BY u.email ORDER BY count(*) DESC LIMIT 1")  # fmt: skip
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
#: A harvester waits as long as a 429 or 503 asks before that connection asks again
#: (``response`` runs just before ``delay`` for the same connection).
POLITE = """response = function(status, h, body)
  if status == 429 or status == 503 then wait = 1000 * (tonumber(h["Retry-After"]) or 1) end
end
delay = function() local w = wait; wait = 0; return w end
"""


def wrk(base_url: str, requests: list[tuple[str, dict]], seconds: int, connections: int = 16,
        polite: bool = False) -> subprocess.Popen:  # fmt: skip
    """A wrk process cycling through ``requests`` (path, headers) from a random start."""
    paths = ", ".join(json.dumps(path) for path, _ in requests)
    cell = ", ".join
    headers = cell("{" + cell(f"[{json.dumps(k)}] = {json.dumps(v)}" for k, v in h.items()) + "}"
                   for _, h in requests)  # fmt: skip
    script = tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False)  # noqa: SIM115
    script.write(LUA % (paths, headers) + (POLITE if polite else ""))
    script.close()
    command = ["wrk", f"-t{min(2, connections)}", f"-c{connections}", f"-d{seconds}s"]
    process = subprocess.Popen([*command, "-s", script.name, base_url], stdout=subprocess.PIPE,
                               text=True)  # fmt: skip
    process.script = script.name  # type: ignore[attr-defined]
    return process


def measured(process: subprocess.Popen) -> dict[str, float]:
    """Answers/s (all, below 400), p50/p95/p99 in ms and error counts of a wrk process."""
    out, _ = process.communicate(timeout=900)
    os.unlink(process.script)  # type: ignore[attr-defined]
    line = next((line for line in out.splitlines() if line.startswith('{"requests"')), None)
    if process.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed: {out[-2000:]}")
    raw = json.loads(line)
    seconds = raw["us"] / 1e6
    figures = {f"p{p}_ms": raw[f"p{p}"] / 1000 for p in (50, 95, 99)}
    figures |= {"rps": raw["requests"] / seconds, "requests": raw["requests"]}
    figures |= {"ok_rps": (raw["requests"] - raw["bad"]) / seconds}
    if raw["bad"] or raw["socket"]:
        c.log(f"  {raw['bad']} answers >= 400, {raw['socket']} socket errors")
    return figures | {"refused": raw["bad"], "socket_errors": raw["socket"]}


def grow(url: str, env: dict, size: int, seeder: Any) -> None:
    if seeder:
        seeder.grow_to(size)
        if size <= 100_000:  # the citations the app's writes leave (too slow for millions)
            c.flask_cli("pages", "refresh-citations", env=env)
        return
    from app import create_app

    seed_orm(create_app({"SQLALCHEMY_DATABASE_URI": url, "STORAGE_BACKEND": "local",
                         "STORAGE_LOCAL_ROOT": env["STORAGE_LOCAL_ROOT"]}), size)  # fmt: skip


def query(url: str, sql: str, **params: Any) -> list[Any]:
    from sqlalchemy import NullPool, create_engine, text

    with create_engine(c.sqlalchemy_url(url), poolclass=NullPool).connect() as conn:
        return list(conn.execute(text(sql), params))


def selective_queries(url: str) -> dict[str, str]:
    """The first title word and case number of three released records spread over the table,
    as staff type them to find one record."""
    (total,) = query(url, "SELECT count(*) FROM file_records")[0]
    sql = ("SELECT titel, aktiv_id FROM file_records WHERE freigabe AND aktiv_id IS NOT NULL "
           "ORDER BY id LIMIT 1 OFFSET :k")  # fmt: skip
    rows = [query(url, sql, k=int(total * f * 0.7))[0] for f in (0, 0.4, 0.8)]
    return {f"selective_{i}": f"{t.split()[0]} {a}" for i, (t, a) in enumerate(rows, 1)}


def upload(server: Any, token: str, workdir: Path) -> str:
    """A released CSV of 64 KiB through the API (seeded records have no stored bytes)."""
    sample, out = workdir / "sample.csv", workdir / "created.json"
    sample.write_text("jahr;wert\n" + "".join(f"{2000 + i % 25};{i}\n" for i in range(7000)))
    form = ["-H", f"Authorization: Bearer {token}", "-F", f"files[]=@{sample}", "-F", "titel=W"]
    c.curl([*form, "-o", str(out), f"{server.base_url}/api/files"])
    return json.loads(out.read_text())["files"][0]["id"]


def classes(url: str, file_id: str, oai: list[str], token: str) -> dict[str, list]:
    """The requests of each class, readers' from many addresses, the harvester's from one."""
    ids = [str(uuid.UUID(str(row[0]))) for row in query(url, "SELECT id FROM file_records WHERE "
           "freigabe AND (sperrfrist IS NULL OR sperrfrist <= CURRENT_DATE) ORDER BY random() "
           "LIMIT 200")]  # fmt: skip
    paths = {"healthz": ["/healthz"], "json": [f"/api/public/files/{i}" for i in ids],
             "range": [f"/api/public/files/{file_id}/download"],
             "page": [f"/records/{i}" for i in ids], "front": ["/"],
             "list": ["/api/public/files?page=2"], "search": ["/search?q=Bericht"],
             "oai": oai[:1], "oai_token": oai[1:2] or oai[:1],
             "auth_json": [f"/api/files/{file_id}"]}  # fmt: skip
    extra = {"range": {"Range": "bytes=1024-2047"},
             "auth_json": {"Authorization": f"Bearer {token}"}}  # fmt: skip
    requests = {name: [(p[k % len(p)], {"X-Forwarded-For": f"10.0.{k // 200}.{k % 200 + 1}"}
                        | extra.get(name, {})) for k in range(256)]
                for name, p in paths.items()}  # fmt: skip
    rnd = random.Random(48)
    requests["mix"] = [rnd.choice(requests[k]) for k, pc in MIX.items() for _ in range(4 * pc)]
    rnd.shuffle(requests["mix"])
    harvest = oai + [f"/api/public/files?page={p}" for p in range(1, 21)]
    return requests | {"harvester": [(p, {"X-Forwarded-For": "203.0.113.9"}) for p in harvest]}


def row_writes(url: str) -> int:
    """Rows inserted, updated and deleted in every table so far, once every backend has
    reported (PostgreSQL flushes a backend's table statistics up to 10 s late)."""
    time.sleep(11)
    sql = "SELECT sum(n_tup_ins + n_tup_upd + n_tup_del) FROM pg_stat_user_tables"
    return query(url, sql)[0][0]


def walk(client: c.Client, who: str | None, url: str, pages: int) -> dict[str, Any]:
    """Follow ``next_cursor`` from the first keyset page (server times; order, duplicates)."""
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
    return {"pages": len(ids), "median_ms": c.median(ms), "p95_ms": c.p95(ms),
            "problems": problems[:5]}  # fmt: skip


def harvest(client: c.Client, max_pages: int) -> tuple[dict[str, Any], list[str]]:
    """ListRecords through every resumption token (server times; the first ten pages' URLs)."""
    ids, urls, records = [], [OAI], 0
    while urls[-1]:
        request_id, _, _, body = client.get(urls[-1])
        ids.append(request_id)
        records += body.count(b"<record>")
        token = TOKEN.search(body.decode())
        more = token and (not max_pages or len(ids) < max_pages)
        urls.append(f"/oai?verb=ListRecords&resumptionToken={quote(token[1])}" if more else "")
    times = client.server.server_times(ids, timeout=30)
    ms = [times[i] for i in ids if i in times]
    later, tenth = ms[1:] or ms, max(1, len(ms) // 10)
    return {"pages": len(ids), "records": records, "first_ms": ms[0], "p95_ms": c.p95(later),
            "p95_to_first": c.p95(later) / ms[0],
            "last_to_first_tenth": c.median(later[-tenth:]) / c.median(later[:tenth])}, \
        [u for u in urls[:10] if u]  # fmt: skip


def server_times(server: Any, tokens: dict, url: str, args: Any) -> tuple[dict, list]:
    client = c.Client(server, tokens)
    searches = selective_queries(url) | BROAD
    urls = {kind: (path, who) for kind, (path, who) in LISTS.items()}
    urls |= {name: (f"/api/public/files?q={quote(q)}", None) for name, q in searches.items()}
    rounds = client.rounds(urls, args.requests, args.warmup)
    keyset = {kind: walk(client, who, path, 0 if kind == "user_own" else args.walk_pages)
              for kind, (path, who) in LISTS.items()}  # fmt: skip
    harvested, oai = harvest(client, args.harvest_pages)
    client.close()
    h, q = harvested, searches
    rows = [[k, q.get(k, ""), r["median_ms"], r["p95_ms"], r["total"]] for k, r in rounds.items()]
    rows += [
        [f"keyset {k}", w["pages"], w["median_ms"], w["p95_ms"], ""] for k, w in keyset.items()
    ]
    rows += [["ListRecords", h["pages"], h["first_ms"], h["p95_ms"], h["records"]]]
    c.print_table(["server time", "query / pages", "median (first) ms", "p95 ms", "total"], rows)
    return {"rounds": rounds, "keyset": keyset, "harvest": harvested, "queries": searches}, oai


def load(server: Any, requests: dict[str, list], args: argparse.Namespace, url: str) -> dict:
    """Each class alone, the mix, and the harvester scenario, on one server."""
    figures: dict[str, Any] = {}

    def run(name: str, seconds: int = args.duration, **kw: Any) -> dict:
        return measured(wrk(server.base_url, requests[name], seconds, **kw))

    run("mix", 3)  # warm-up
    for name in [*MIX, "healthz", "mix", "auth_json"]:
        before = row_writes(url) if name == "auth_json" and args.postgres else 0
        figures[name] = run(name)
        c.log(f"  {name}: {figures[name]['ok_rps']:.0f}/s, p95 {figures[name]['p95_ms']:.1f} ms")
    if args.postgres:
        figures["auth_json"]["row_writes"] = row_writes(url) - before
    pairs = []
    for _ in range(args.reps):  # pages alone, then beside the harvester
        quiet = run("page", connections=8)
        harvester = wrk(server.base_url, requests["harvester"], args.duration, polite=True)
        pairs.append({"quiet": quiet, "beside": run("page", connections=8)})
        pairs[-1]["harvester"] = measured(harvester)
    for key in pairs[0]:  # the medians, and the pairs for their ratios
        figures[key] = {k: c.median(p[key][k] for p in pairs) for k in pairs[0][key]}
    return figures | {"pairs": pairs}


def main() -> None:
    parser = argparse.ArgumentParser(description="Load per class, mix, harvester; lists at scale.")
    parser.add_argument("--records", default="300", help="sizes to grow through [300]")
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL, not SQLite")
    parser.add_argument("--s3", action="store_true", help="S3 (SeaweedFS), not a local folder")
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run [10]")
    parser.add_argument("--processes", type=int, help="SERVER_PROCESSES of the server")
    parser.add_argument("--compare-processes", action="store_true", help="1 and one per core")
    parser.add_argument("--requests", type=int, default=30, help="timed rounds per list [30]")
    parser.add_argument("--warmup", type=int, default=3, help="unrecorded rounds first [3]")
    parser.add_argument("--walk-pages", type=int, default=200, help="keyset pages, 0: all [200]")
    parser.add_argument("--harvest-pages", type=int, default=0, help="0: the whole list [0]")
    parser.add_argument("--reps", type=int, default=3, help="quiet/harvester pairs [3]")
    parser.add_argument("--keep", action="store_true", help="keep the database and work folder")
    c.without_option(parser, "the wrk part once more without NAME (heavy-gate)")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.records.split(","))
    report = c.Report("load", vars(args).copy())
    report.data = data = {"sizes": {}, "load": {}, "uptime": []}
    with contextlib.ExitStack() as stack:
        shape = (args.keep, args.postgres, args.s3)
        workdir, url, env = c.migrated_postgres(stack, "load", *shape, PROXY_COUNT="1")
        c.make_user(env, *ADMIN, admin=True)
        seeder = Seeder(url) if args.postgres else None
        if seeder:
            seeder.create_users()
        for size in sizes:
            began = time.perf_counter()
            grow(url, env, size, seeder)
            c.log(f"grown to {size:,} records in {time.perf_counter() - began:.1f} s")
            (heaviest,) = query(url, HEAVIEST)[0]
            c.flask_cli("users", "set-password", heaviest, "--password", USER_PASSWORD, env=env)
            server = c.app_server(f"app-{size}", env, workdir)
            try:
                tokens = {"admin": c.login(server.port, *ADMIN)}
                tokens["user"] = c.login(server.port, heaviest, USER_PASSWORD)
                data["sizes"][size], oai = server_times(server, tokens, url, args)
                file_id = upload(server, tokens["admin"], workdir)
            finally:
                server.stop()
        requests = classes(url, file_id, oai, tokens["admin"])
        counts = [1, os.cpu_count() or 1] if args.compare_processes else [args.processes]
        for n, without in [(n, w) for n in counts for w in ["", *args.without]]:
            name = f"{n or 'default'} processes" + (f", without {without}" if without else "")
            server_env = env | ({"SERVER_PROCESSES": str(n)} if n else {})
            server = c.app_server(f"app-load-{n}{without}", server_env, workdir, without=without)
            c.log(f"wrk: {name}")
            try:
                data["load"][name] = load(server, requests, args, url)
            finally:
                server.stop()
            data["uptime"].append(subprocess.run(["uptime"], capture_output=True, text=True).stdout)
            c.log(data["uptime"][-1].strip())
    evaluate(report, sizes, data)
    report.save()


def evaluate(report: c.Report, sizes: list[int], data: dict) -> None:
    check = report.check
    for name, f in data["load"].items():
        print(f"\nwrk, {name}, {sizes[-1]:,} records")
        keys = ["rps", "ok_rps", "refused", "p50_ms", "p95_ms", "p99_ms"]
        rows = [[k, *(v[key] for key in keys)] for k, v in f.items() if k != "pairs"]
        c.print_table(["class", *keys], rows)
        at, healthz = f"({name})", f["healthz"]["ok_rps"]
        check(f"mix / healthz answers/s below 400 {at}", f["mix"]["ok_rps"] / healthz, 0.5, True)
        auth = f["auth_json"]["ok_rps"] / healthz
        check(f"authenticated record / healthz answers/s {at}", auth, 0.5, True)
        if "row_writes" in f["auth_json"]:
            writes = f["auth_json"]["row_writes"] / f["auth_json"]["requests"]
            check(f"row writes per authenticated request {at}", writes, 0.001, False)
        for kind in ("list", "oai", "oai_token", "search", "front"):
            cost = f["json"]["ok_rps"] / max(f[kind]["ok_rps"], 1e-9)  # none answered: inf
            check(f"{kind} cost / JSON record cost {at}", cost, 3, False, "x")
        pairs = f["pairs"]
        p95_ratio = c.median(p["beside"]["p95_ms"] / p["quiet"]["p95_ms"] for p in pairs)
        rps_ratio = c.median(p["beside"]["ok_rps"] / p["quiet"]["ok_rps"] for p in pairs)
        at = f"beside a harvester / quiet, median of {len(pairs)} pairs {at}"
        check(f"pages p95 {at}", p95_ratio, 1.5, False, "x")
        check(f"pages answers/s {at}", rps_ratio, 0.7, True)
    by_processes = [(k, v) for k, v in data["load"].items() if "without" not in k]
    if len(by_processes) == 2:
        (_, one), (many_name, many) = by_processes
        ratio = many["mix"]["ok_rps"] / one["mix"]["ok_rps"]
        check(f"mix answers/s, {many_name} / 1", ratio, 1.6, True)
    large, small, n = data["sizes"][sizes[-1]], data["sizes"][sizes[0]], f"{sizes[-1]:,}"
    for kind, r in large["rounds"].items():
        what = "p95_ms" if kind not in LISTS else "median_ms"
        limit = 15 if kind == "user_own" else 50
        check(f"{kind} {what[:-3]} server time at {n}", r[what], limit, False, " ms")
        if len(sizes) > 1:
            growth = r[what] / small["rounds"][kind][what]
            check(f"{kind} growth {sizes[0]:,} -> {n}", growth, 3, False, "x")
    for kind, walked in large["keyset"].items():
        label = f"keyset {kind}: p95 of {walked['pages']} pages at {n}"
        check(label, walked["p95_ms"], 15, False, " ms")
        if walked["problems"]:
            print(f"WARN  keyset {kind}: order or duplicates {walked['problems']}")
    h = large["harvest"]
    check(f"harvest at {n}: p95 page / first page", h["p95_to_first"], 2, False, "x")
    check(f"harvest at {n}: last tenth / first tenth", h["last_to_first_tenth"], 2, False, "x")


if __name__ == "__main__":
    main()
