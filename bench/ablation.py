"""Ablation: each piece of performance machinery against its target, with and without it.

Issue 12 item 5: every mechanism earns its place by moving the target it serves by at least
5 % in the same run. Servers with and without it (``app_server(..., without=NAME)``, the one
switch of bench/README.md) run side by side on the same PostgreSQL, SeaweedFS and files, and
their measurements alternate: ``record-cache`` and ``token-cache`` on GET /api/files/{id}
over /healthz (wrk), the record cache also on Range 1 MiB; ``presigned`` on the 200 MiB
download and Range 1 MiB (over curl on a presigned URL); ``commits`` on local uploads (over
the bare waitress endpoint); ``glibc`` on the memory of three transfers at once.

Per target the figure is the median over the repetitions (throughput over its baseline;
memory: peak RSS - idle RSS). The effect is how much better the target is with the mechanism
(with / without - 1; memory: without / with - 1): ``keep`` at >= 5 % on any of its targets,
else ``remove``; ``marginal`` when the paired per-repetition effects' quartiles straddle 5 %.

    .venv/bin/python -m bench.ablation                 # 7 repetitions (~15 min)
    .venv/bin/python -m bench.ablation --reps 3 --big-mib 40 --small-count 5 --duration 2
    .venv/bin/python -m bench.ablation --only metadata --without token-cache
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.common import (
    MiB,
    Postgres,
    Report,
    Server,
    alternate,
    app_env,
    app_server,
    bare_server,
    curl,
    log,
    login,
    make_user,
    median,
    mib_per_s,
    prepare_database,
    print_table,
    s3_client,
    s3_settings,
    start_s3,
    without_option,
    workspace,
)
from bench.load import measured, upload, wrk
from bench.transfer import Service, file_args, memory, timed_upload, write_mp4

EMAIL, PASSWORD = "bench-ablation@example.org", "bench password 1234"
THRESHOLD = 0.05
BARE = "bare waitress to disk"
WITH = "with all"
#: Mechanism -> its name for ``without`` (the variant without it).
MECHANISMS = {
    "record cache": "record-cache",
    "token cache": "token-cache",
    "presigned S3 reads": "presigned",
    "background commits": "commits",
    "glibc tuning": "glibc",
}
CHOSEN: set[str] = set(MECHANISMS.values())


def chosen(*variants: str) -> list[str]:
    """The variants of a part that this run measures: "with all" and the chosen ones."""
    return [WITH, *(v for v in variants if v in CHOSEN)]


def start(stack: contextlib.ExitStack, tag: str, env: dict, variant: str, workdir: Path) -> Server:
    without = "" if variant == WITH else variant
    server = app_server(f"{tag}-{variant.replace(' ', '-')}", env, workdir, without=without)
    stack.callback(server.stop)
    return server


def loadavg() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


# --- one target: variants measured alternately ------------------------------------------


@dataclass
class Target:
    """One target's runs per variant (MiB/s, ratio or MiB per repetition); with ``baseline``
    the figure of a variant is its median over the baseline's."""

    name: str
    unit: str
    higher_is_better: bool
    runs: dict[str, list[float]]
    baseline: str | None = None

    def figure(self, variant: str) -> float:
        value = median(self.runs[variant])
        if self.baseline:
            value /= median(self.runs[self.baseline])
        return value

    def effect(self, variant: str) -> tuple[float, list[float]]:
        """How much better "with all" is than ``variant``, and the paired per-repetition
        effects (the baseline cancels out of those)."""
        w, wo = self.figure(WITH), self.figure(variant)
        paired = [
            (a / b if self.higher_is_better else b / a) - 1
            for a, b in zip(self.runs[WITH], self.runs[variant], strict=True)
            if a > 0 and b > 0
        ]
        return ((w / wo) if self.higher_is_better else (wo / w)) - 1, paired

    def as_dict(self) -> dict[str, Any]:
        figures = {v: self.figure(v) for v in self.runs if v != self.baseline}
        return {**asdict(self), "figures": figures}


def rotate(
    reps: int, warmup: int, runners: dict[str, Callable[[], float]], label: str
) -> dict[str, list[float]]:
    if not set(runners) & CHOSEN:
        return {}
    log(f"{label}: {', '.join(runners)}; {reps} reps, load {loadavg()}")
    runs = alternate(
        reps, [(name, lambda rep, f=fn: f()) for name, fn in runners.items()], warmup=warmup
    )
    print_table(
        ["variant", *[f"rep{i + 1}" for i in range(reps)], "median"],
        [[name, *values, median(values)] for name, values in runs.items()],
    )
    return runs


# --- measurements -----------------------------------------------------------------------


def metadata_targets(
    stack: contextlib.ExitStack, args: argparse.Namespace, workdir: Path, pg: Postgres, _: dict
) -> list[Target]:
    storage = {"STORAGE_BACKEND": "local", "STORAGE_LOCAL_ROOT": str(workdir / "meta-storage")}
    env = app_env(pg.create("bench_ablation_meta"), storage, workdir / "meta-tmp")
    prepare_database(env)
    make_user(env, EMAIL, PASSWORD)
    variants = chosen("record-cache", "token-cache")
    servers = {v: start(stack, "meta", env, v, workdir) for v in variants}
    tokens = {v: login(s.port, EMAIL, PASSWORD) for v, s in servers.items()}
    record_id = upload(servers[WITH], tokens[WITH], workdir)

    def measure(variant: str) -> float:
        """req/s of the record GET over /healthz's, measured back to back on one server."""
        server = servers[variant]
        auth = {"Authorization": f"Bearer {tokens[variant]}"}
        pair = [("/healthz", {}), (f"/api/files/{record_id}", auth)]
        results = [measured(wrk(server.base_url, [p], args.duration, connections=8)) for p in pair]
        for result in results:
            if result["refused"] or result["socket_errors"]:
                raise RuntimeError(f"{variant}: {result}")
        server.access_entries()  # keep the log offset moving
        return results[1]["rps"] / results[0]["rps"]

    label = "metadata: GET /api/files/{id} req/s over /healthz req/s"
    runs = rotate(args.reps, 1, {v: (lambda v=v: measure(v)) for v in variants}, label)
    for server in servers.values():
        server.stop()
    return [Target("GET /api/files/{id} / /healthz (req/s)", "", True, runs)]


def s3_targets(
    stack: contextlib.ExitStack, args: argparse.Namespace, workdir: Path, pg: Postgres, files: dict
) -> list[Target]:
    s3 = start_s3(workdir)
    stack.callback(s3.stop)
    bucket = f"bench-{uuid.uuid4().hex[:12]}"
    client = s3_client(s3)
    client.create_bucket(Bucket=bucket)
    url = pg.create("bench_ablation_s3")
    env = app_env(url, s3_settings(s3, bucket), workdir / "s3-tmp")
    prepare_database(env)
    make_user(env, EMAIL, PASSWORD)
    variants = chosen("record-cache", "presigned")
    servers = {v: start(stack, "s3", env, v, workdir) for v in variants}
    services = {v: Service(s, login(s.port, EMAIL, PASSWORD), workdir) for v, s in servers.items()}
    [record_id] = services[WITH].upload([files["big"]])["ids"]
    import psycopg

    with psycopg.connect(url) as conn:
        query = "SELECT stored_path FROM file_records WHERE id = %s"
        key = conn.execute(query, (record_id,)).fetchone()[0]
    presigned = client.generate_presigned_url(
        "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=6 * 3600
    )
    size = files["big"].stat().st_size

    def target(variant: str | None) -> tuple[str, list[str]]:
        if variant is None:
            return presigned, []
        base = services[variant].server.base_url
        return f"{base}/api/files/{record_id}/download", services[variant].auth

    def download(variant: str | None) -> float:
        url, headers = target(variant)
        [record] = curl([*headers, "-o", os.devnull, url])
        if record["http_code"] != 200 or record["size_download"] != size:
            raise RuntimeError(f"download {variant}: {record['http_code']}")
        return mib_per_s(size, record["time_total"])

    runners: dict[str, Callable[[], float]] = {"curl presigned S3": lambda: download(None)}
    runners.update({v: (lambda v=v: download(v)) for v in chosen("presigned")})
    runs = rotate(args.reps, 1, runners, f"download 1 x {args.big_mib} MiB (MiB/s)")
    label = f"download {args.big_mib} MiB / curl"
    targets = [Target(label, "", True, runs, "curl presigned S3")]

    rng = random.Random(42)
    offsets = [rng.randrange(0, size - MiB) for _ in range(args.slices)]

    def slices(variant: str | None) -> float:
        url, headers = target(variant)
        chain: list[str] = []
        for i, begin in enumerate(offsets):
            chain += ["--next"] if i else []
            chain += [*headers, "-H", "Expect:", "-r", f"{begin}-{begin + MiB - 1}"]
            chain += ["-w", "%{json}\n", "-o", os.devnull, url]
        records = curl(chain)
        if [(r["http_code"], r["size_download"]) for r in records] != [(206, MiB)] * len(offsets):
            raise RuntimeError(f"range {variant}: bad answers")
        return mib_per_s(len(offsets) * MiB, sum(r["time_total"] for r in records))

    runners = {"curl presigned S3": lambda: slices(None)}
    runners.update({v: (lambda v=v: slices(v)) for v in chosen("record-cache", "presigned")})
    runs = rotate(args.reps, 1, runners, f"Range {args.slices} x 1 MiB (MiB/s)")
    targets.append(Target("Range 1 MiB / curl", "", True, runs, "curl presigned S3"))

    for server in servers.values():
        server.stop()

    # Memory: a fresh server per measurement (transfer.py's scenario), alternating.
    token = services[WITH].token
    growth: dict[str, list[float]] = {}

    def peak(variant: str) -> float:
        scratch = Report("ablation-memory", {})
        without = "" if variant == WITH else variant
        memory(scratch, SimpleNamespace(reps=1), env, workdir, files, record_id, token, without)
        run = scratch.data["memory"][0]
        growth.setdefault(variant, []).append(run["idle_rss"] / MiB)
        return run["growth"] / MiB

    runs = rotate(
        args.reps,
        0,
        {v: (lambda v=v: peak(v)) for v in chosen("glibc")},
        "memory: peak RSS - idle RSS, 3 transfers at once (MiB)",
    )
    print("  idle RSS (MiB): " + "; ".join(f"{v} {median(x):.1f}" for v, x in growth.items()))
    targets.append(Target("memory: peak - idle RSS (MiB)", " MiB", False, runs))
    client.close()
    return targets


def local_targets(
    stack: contextlib.ExitStack, args: argparse.Namespace, workdir: Path, pg: Postgres, files: dict
) -> list[Target]:
    url = pg.create("bench_ablation_local")
    variants = chosen("commits")
    servers = {}
    for v in variants:
        storage = {"STORAGE_BACKEND": "local", "STORAGE_LOCAL_ROOT": str(workdir / f"local-{v}")}
        env = app_env(url, storage, workdir / "local-tmp")
        if not servers:
            prepare_database(env)
            make_user(env, EMAIL, PASSWORD)
        servers[v] = start(stack, "local", env, v, workdir)
    services = {v: Service(s, login(s.port, EMAIL, PASSWORD), workdir) for v, s in servers.items()}
    bare_dir = workdir / "bare-target"
    bare = bare_server("bare", workdir, bare_dir)
    stack.callback(bare.stop)

    def bare_upload(paths: list[Path]) -> float:
        out = workdir / "bare-answer.json"
        [record] = curl([*file_args(paths), "-o", str(out), f"{bare.base_url}/upload"])
        if record["http_code"] != 201:
            raise RuntimeError(f"bare upload answered {record['http_code']}")
        for leftover in bare_dir.iterdir():
            leftover.unlink()
        return mib_per_s(sum(p.stat().st_size for p in paths), record["time_total"])

    def upload(variant: str, paths: list[Path]) -> float:
        run = timed_upload(services[variant], paths, {})
        return mib_per_s(sum(p.stat().st_size for p in paths), run["seconds"])

    targets = []
    for label, paths in (
        (f"local upload 1 x {args.big_mib} MiB / bare", [files["big"]]),
        (f"local upload {args.small_count} x {args.small_mib} MiB / bare", files["small"]),
    ):
        runners: dict[str, Callable[[], float]] = {BARE: lambda p=paths: bare_upload(p)}
        runners.update({v: (lambda v=v, p=paths: upload(v, p)) for v in variants})
        runs = rotate(args.local_reps, 1, runners, f"{label} (MiB/s)")
        targets.append(Target(label, "", True, runs, BARE))
    for server in [*servers.values(), bare]:
        server.stop()
    return targets


# --- verdicts ---------------------------------------------------------------------------


def quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"), float("nan"))
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def verdicts(targets: list[Target]) -> list[dict[str, Any]]:
    rows = []
    for mechanism, variant in MECHANISMS.items():
        for target in targets:
            if variant not in target.runs:
                continue
            effect, paired = target.effect(variant)
            low, high = quartiles(paired)
            row = {"mechanism": mechanism, "target": target.name, "effect": effect}
            row |= {"with": target.figure(WITH), "without": target.figure(variant)}
            row |= {"paired_q1": low, "paired_q3": high, "paired": paired}
            rows.append(row | {"keep": effect >= THRESHOLD, "marginal": low < THRESHOLD <= high})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description="Each performance mechanism, with and without.")
    parser.add_argument("--reps", type=int, default=7, help="repetitions [7]")
    parser.add_argument("--local-reps", type=int, default=9, help="of the local uploads [9]")
    parser.add_argument("--duration", type=int, default=5, help="seconds per wrk run [5]")
    parser.add_argument("--big-mib", type=int, default=200, help="the single file [200]")
    parser.add_argument("--small-mib", type=int, default=8, help="each of the many files [8]")
    parser.add_argument("--small-count", type=int, default=25, help="how many [25]")
    parser.add_argument("--slices", type=int, default=64, help="1 MiB Range requests [64]")
    parser.add_argument("--only", default="metadata,s3,local", help="parts [metadata,s3,local]")
    parser.add_argument("--keep", action="store_true", help="keep the work folder and logs")
    without_option(parser, "measure only these mechanisms")
    args = parser.parse_args()
    CHOSEN.intersection_update(",".join(args.without).split(",") if args.without else CHOSEN)
    report = Report("ablation", vars(args).copy())
    parts = set(args.only.split(","))
    load_start = loadavg()
    log(f"load average at start: {load_start}")
    targets: list[Target] = []
    with contextlib.ExitStack() as stack:
        workdir = stack.enter_context(workspace("ablation", keep=args.keep))
        pg = Postgres()
        stack.callback(pg.drop_all)
        files: dict[str, Any] = {}
        if parts & {"s3", "local"}:
            files["big"] = write_mp4(workdir / "big.mp4", args.big_mib * MiB)
            small = [workdir / f"small-{i:02d}.mp4" for i in range(args.small_count)]
            files["small"] = [write_mp4(path, args.small_mib * MiB) for path in small]
        for part, measure in (("metadata", metadata_targets), ("s3", s3_targets),
                              ("local", local_targets)):  # fmt: skip
            if part in parts:
                with contextlib.ExitStack() as phase:
                    targets += measure(phase, args, workdir, pg, files)
    load_end = loadavg()
    rows = verdicts(targets)
    print(f"\nload average: at start {load_start}; at end {load_end}")
    print_table(
        ["mechanism", "target", "with", "without", "effect %", "paired q1-q3 %", "verdict"],
        [
            [r["mechanism"], r["target"], r["with"], r["without"], f"{r['effect'] * 100:+.1f}",
             f"{r['paired_q1'] * 100:+.1f}..{r['paired_q3'] * 100:+.1f}",
             ("keep" if r["keep"] else "remove") + (" (marginal)" if r["marginal"] else "")]
            for r in rows
        ],
    )  # fmt: skip
    report.data = {"load_average": {"start": load_start, "end": load_end}, "verdicts": rows}
    report.data["targets"] = [t.as_dict() for t in targets]
    report.save()


if __name__ == "__main__":
    main()
