"""Metadata speed: requests per second of one record against ``/healthz`` (issue item 5).

``wrk`` (Debian's package; 1 thread, 8 connections) loads, one endpoint at a time, on loopback
the same ``flask serve``: ``/healthz``, the app's bare JSON endpoint through the same middleware
(access log, Flask, rate limiter) but without token or database, and ``GET /api/files/{id}``,
one record with a bearer token.

Targets: ``GET /api/files/{id}`` >= 0.5 of ``/healthz``'s requests per second. Token checks
must not write to the database: the row writes of every table (``pg_stat_user_tables``) are
compared before and after the authenticated load.

    .venv/bin/python -m bench.metadata                 # 3 x 10 s per endpoint
    .venv/bin/python -m bench.metadata --duration 3    # a quick trial
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.common import (
    Report,
    alternate,
    app_server,
    curl,
    log,
    login,
    make_user,
    median,
    migrated_postgres,
    print_table,
    request,
)

EMAIL, PASSWORD = "bench-meta@example.org", "bench password 1234"
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def parse_wrk(text: str) -> dict[str, Any]:
    """Requests/sec, latency percentiles (ms), errors and non-2xx answers of a wrk run."""

    def ms(value: str) -> float:
        number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", value).groups()  # type: ignore[union-attr]
        return float(number) * _UNITS[unit]

    result: dict[str, Any] = {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", text)[1])}
    result["requests"] = int(re.search(r"(\d+) requests in", text)[1])
    for pct in ("50", "99"):
        match = re.search(rf"^\s+{pct}(?:\.0+)?%\s+(\S+)", text, re.MULTILINE)
        result[f"p{pct}_ms"] = ms(match[1]) if match else None
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    result["non_2xx"] = int(non2xx[1]) if non2xx else 0
    errors = re.search(r"Socket errors: (.*)", text)
    result["socket_errors"] = errors[1] if errors else ""
    return result


def run_wrk(url: str, headers: list[str], duration: int) -> dict[str, Any]:
    command = ["wrk", "-t1", "-c8", f"-d{duration}s", "--latency"]
    for header in headers:
        command += ["-H", header]
    done = subprocess.run([*command, url], capture_output=True, text=True, timeout=duration + 60)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed: {done.stderr or done.stdout}")
    return parse_wrk(done.stdout)


def table_writes(database_url: str) -> dict[str, int]:
    """Rows inserted, updated and deleted per table since the statistics were reset."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        rows = conn.execute(
            "SELECT relname, n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables"
        ).fetchall()
    return {name: int(n) for name, n in rows}


def writes_between(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {t: after.get(t, 0) - before.get(t, 0) for t in after if after[t] != before.get(t, 0)}


def sample_record(server: Any, token: str, workdir: Path) -> str:
    """The id of a small CSV record uploaded through the API."""
    sample, out = workdir / "sample.csv", workdir / "created.json"
    sample.write_text("jahr;wert\n2024;1\n2025;2\n")
    form = ["-H", f"Authorization: Bearer {token}", "-F", f"files[]=@{sample}"]
    form += ["-F", "titel=Messwerte"]
    curl([*form, "-o", str(out), f"{server.base_url}/api/files"])
    return json.loads(out.read_text())["files"][0]["id"]


def settle() -> None:
    """Let every backend report its table statistics.

    PostgreSQL 15 backends flush them at the end of a transaction at most once a second, and
    one that then goes idle only after PGSTAT_IDLE_INTERVAL (10 s).
    """
    time.sleep(11)


def token_rows(database_url: str) -> dict[int, tuple[str, Any]]:
    """Each token's row version (xmin) and last_used_at: any UPDATE changes the xmin at once."""
    import psycopg

    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute("SELECT id, xmin::text, last_used_at FROM api_tokens").fetchall()
    return {token_id: (xmin, used) for token_id, xmin, used in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description="Requests per second of metadata endpoints.")
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run [10]")
    parser.add_argument("--reps", type=int, default=3, help="repetitions (>= 3) [3]")
    parser.add_argument("--keep", action="store_true", help="keep the work folder and logs")
    args = parser.parse_args()
    report = Report("metadata", vars(args).copy())

    with contextlib.ExitStack() as stack:
        workdir, database_url, env = migrated_postgres(stack, "metadata", args.keep)
        make_user(env, EMAIL, PASSWORD)
        server = app_server("app", env, workdir)
        stack.callback(server.stop)
        token = login(server.port, EMAIL, PASSWORD)
        auth = f"Authorization: Bearer {token}"
        record_id = sample_record(server, token, workdir)

        # Does the probe see a write at all? A new token's first use records last_used_at.
        fresh = login(server.port, EMAIL, PASSWORD)
        settle()
        before = table_writes(database_url)
        headers = {"Authorization": f"Bearer {fresh}"}
        status, _, _ = request(server.port, "GET", f"/api/files/{record_id}", headers=headers)
        if status != 200:
            raise RuntimeError(f"GET /api/files/{record_id} answered {status}")
        settle()
        probe = writes_between(before, table_writes(database_url))
        log(f"probe (first authenticated requests of a new token): writes {probe}")

        endpoints = {
            "app /healthz": (f"{server.base_url}/healthz", []),
            "app GET /api/files/{id}": (f"{server.base_url}/api/files/{record_id}", [auth]),
        }
        authenticated_requests = 0

        def load(name: str) -> dict[str, Any]:
            nonlocal authenticated_requests
            url, headers = endpoints[name]
            result = run_wrk(url, headers, args.duration)
            if result["non_2xx"] or result["socket_errors"]:
                log(f"{name}: {result['non_2xx']} non-2xx, socket errors {result['socket_errors']}")
            result["server_ms_median"] = median(e["duration_ms"] for e in server.access_entries())
            if headers:
                authenticated_requests += result["requests"]
            log(f"{name}: {result['rps']:.0f} req/s, p50 {result['p50_ms']} ms")
            return result

        # Every endpoint under load only reads: any row written between the two snapshots
        # is a write made by serving requests.
        tokens_before = token_rows(database_url)
        before = table_writes(database_url)
        log(f"wrk: {args.reps} x {args.duration} s per endpoint, 8 connections")
        runs = alternate(
            args.reps, [(name, lambda rep, n=name: load(n)) for name in endpoints], warmup=0
        )
        tokens_changed = [
            token_id
            for token_id, row in token_rows(database_url).items()
            if tokens_before.get(token_id) != row
        ]
        settle()
        writes = writes_between(before, table_writes(database_url))

    rps = {name: median(r["rps"] for r in variant) for name, variant in runs.items()}
    rows = [
        [name, *[r["rps"] for r in rs], rps[name]]
        + [median(r[key] for r in rs) for key in ("p50_ms", "p99_ms", "server_ms_median")]
        for name, rs in runs.items()
    ]
    reps = [f"rep{i + 1} req/s" for i in range(args.reps)]
    print_table(["endpoint", *reps, "median req/s", "p50 ms", "p99 ms", "in app ms"], rows)
    ratio_healthz = rps["app GET /api/files/{id}"] / rps["app /healthz"]
    per_request = sum(writes.values()) / max(1, authenticated_requests)
    report.data = {
        "runs": runs,
        "median_rps": rps,
        "ratio_to_healthz": ratio_healthz,
        "probe_writes": probe,
        "writes_during_authenticated_load": writes,
        "authenticated_requests": authenticated_requests,
        "token_rows_updated": tokens_changed,
        "writes_per_request": per_request,
    }
    print(
        f"\nrow writes during {authenticated_requests} authenticated requests: "
        f"{writes or 'none'}; token rows updated: {tokens_changed or 'none'}; "
        f"probe saw {probe or 'nothing'}"
    )
    report.check("GET /api/files/{id} req/s relative to /healthz", ratio_healthz, 0.5, True)
    report.check("row writes per authenticated request", per_request, 0.001, False)
    report.save()


if __name__ == "__main__":
    main()
