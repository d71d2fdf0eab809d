"""Transfers against the ceiling of the architecture (issue items 2-4, issue 12).

Targets: S3 upload of 200 MiB, downloads of 200 MiB (token, public) and 64 Range requests of
1 MiB >= 0.9 of the bare forwarder of bench/bare.py (``--s3``); 25 x 8 MiB in one request to
S3 >= 0.8 of 25 boto3 ``upload_file`` calls; uploads to the local backend >= 0.8 of a bare
waitress endpoint writing the same body to disk; peak RSS of a fresh server while three
clients upload 25 x 8 MiB, upload 200 MiB and download 200 MiB at once within 64 MiB of idle;
an upload's temporary disk at most one copy of the request.

Clients never hold a file in memory: uploads and downloads are ``curl`` (bodies streamed from
disk, timing from curl's ``time_total``). Files are MP4 containers around random bytes, so
SeaweedFS cannot compress them and the service's type detection accepts them.

    .venv/bin/python -m bench.transfer                       # full size
    .venv/bin/python -m bench.transfer --big-mib 20 --small-mib 1 --slices 16   # a quick trial
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import struct
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bench.common import (
    MiB,
    Postgres,
    Report,
    Sampler,
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
    proc_status,
    request,
    reset_peak_rss,
    s3_client,
    s3_settings,
    start_s3,
    workspace,
)

EMAIL, PASSWORD = "bench-user@example.org", "bench password 1234"
PARTS = ("s3-uploads", "downloads", "memory", "local-uploads")
#: The target of the S3 transfers: service / bare forwarder (issue 12).
FORWARDER_TARGET = 0.9
DIRECT_UPLOAD = "boto3 upload_file"
FORWARDER = "bare forwarder"
SERVICE = "service POST /api/files"
BARE = "bare waitress to disk"


# --- test files -------------------------------------------------------------------------


def write_mp4(path: Path, size: int) -> Path:
    """An MP4 (ftyp, mdat of random bytes, empty moov) of exactly ``size`` bytes."""
    ftyp = struct.pack(">I4s4sI8s", 24, b"ftyp", b"isom", 0x200, b"isomiso2")
    moov = struct.pack(">I4s", 8, b"moov")
    mdat_size = size - len(ftyp) - len(moov)
    assert mdat_size >= 8, "file too small"
    with path.open("wb") as file:
        file.write(ftyp)
        file.write(struct.pack(">I4s", mdat_size, b"mdat"))
        left = mdat_size - 8
        while left:
            chunk = os.urandom(min(4 * MiB, left))
            file.write(chunk)
            left -= len(chunk)
        file.write(moov)
    return path


# --- clients ----------------------------------------------------------------------------


def file_args(files: list[Path]) -> list[str]:
    """curl's form of an upload: the files and a path."""
    args = ["-F", "path=bench/transfer"]
    for path in files:
        args += ["-F", f"files[]=@{path};type=video/mp4"]
    return args


class Service:
    """The app under test, with a signed-in user."""

    def __init__(self, server: Server, token: str, workdir: Path) -> None:
        self.server = server
        self.token = token
        self.workdir = workdir
        self.auth = ["-H", f"Authorization: Bearer {token}"]

    def upload(self, files: list[Path]) -> dict[str, Any]:
        """POST /api/files with the files (and a path); returns timing and the new ids."""
        out = self.workdir / f"{uuid.uuid4().hex}.json"
        url = f"{self.server.base_url}/api/files"
        [record] = curl([*self.auth, *file_args(files), "-o", str(out), url])
        body = json.loads(out.read_text() or "{}")
        out.unlink()
        if record["http_code"] != 201:
            raise RuntimeError(f"upload answered {record['http_code']}: {body}")
        ids = [item["id"] for item in body["files"]]
        return {"seconds": record["time_total"], "bytes_sent": record["size_upload"], "ids": ids}

    def delete(self, ids: list[str]) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        for record_id in ids:
            path = f"/api/files/{record_id}"
            status, _, data = request(self.server.port, "DELETE", path, None, headers)
            if status != 204:
                raise RuntimeError(f"delete answered {status}: {data[:200]!r}")


def timed_upload(service: Service, files: list[Path], categories: dict[str, Path]) -> dict:
    with Sampler(service.server.pid, file_categories=categories) as sampler:
        run = service.upload(files)
    run["temp_peak"] = sampler.peak_files()
    service.delete(run.pop("ids"))
    return run


# --- scenarios --------------------------------------------------------------------------


def summarize(
    report: Report, label: str, runs: dict[str, list[dict]], nbytes: int, baseline: str,
    service: str, target: float,
) -> None:  # fmt: skip
    """Medians in MiB/s and the target ratio service/``baseline``."""
    mib_s = {name: [mib_per_s(nbytes, r["seconds"]) for r in rs] for name, rs in runs.items()}
    medians = {name: median(values) for name, values in mib_s.items()}
    report.data.setdefault("mib_s", {})[label] = mib_s
    print_table(
        ["variant", *[f"rep{i + 1} MiB/s" for i in range(len(mib_s[baseline]))], "median MiB/s"],
        [[name, *values, medians[name]] for name, values in mib_s.items()],
    )
    what = "service/forwarder" if baseline == FORWARDER else "service/baseline"
    report.check(f"{label}: {what} throughput", medians[service] / medians[baseline], target, True)


def check_temp(report: Report, label: str, runs: list[dict]) -> None:
    """The waitress spool is the one copy of the request (1 % slack: its multipart framing)."""
    copies = max(r["temp_peak"].get("spool", 0) / r["bytes_sent"] for r in runs)
    report.check(f"{label}: temporary disk (copies of the request)", copies, 1.01, False, "x")


def s3_uploads(
    report: Report, args: argparse.Namespace, service: Service, forwarder: Server, s3: Any,
    bucket: str, files: dict,
) -> None:  # fmt: skip
    """1 x 200 MiB against the forwarder (target 0.9); 25 x 8 MiB in one request against
    25 direct ``upload_file`` calls one after the other (target 0.8)."""
    client = s3_client(s3)
    categories = {"spool": Path(service.server.env["TMPDIR"])}

    def forwarded(paths: list[Path]) -> dict[str, Any]:
        """The same request (curl, the same multipart form) to the bare forwarder."""
        key = f"bench/forwarder/{uuid.uuid4()}"
        out = forwarder.log_path.with_suffix(".answer.json")
        url = f"{forwarder.base_url}/s3?key={quote(key)}"
        [record] = curl([*file_args(paths), "-o", str(out), url])
        if record["http_code"] != 201:
            raise RuntimeError(f"forwarder upload answered {record['http_code']}")
        client.delete_object(Bucket=bucket, Key=key)
        return {"seconds": record["time_total"], "bytes_sent": record["size_upload"]}

    def direct(paths: list[Path]) -> dict[str, Any]:
        keys = [f"bench/direct/{uuid.uuid4()}" for _ in paths]
        began = time.perf_counter()
        for path, key in zip(paths, keys, strict=True):
            client.upload_file(str(path), bucket, key)
        seconds = time.perf_counter() - began
        for key in keys:
            client.delete_object(Bucket=bucket, Key=key)
        return {"seconds": seconds}

    single = f"upload 1 x {args.big_mib} MiB to S3"
    many = f"upload {args.small_count} x {args.small_mib} MiB to S3"
    for label, paths, baseline, target in (
        (single, [files["big"]], FORWARDER, FORWARDER_TARGET),
        (many, files["small"], DIRECT_UPLOAD, 0.8),
    ):
        log(label)
        other = forwarded if baseline == FORWARDER else direct
        variants = [(baseline, lambda rep, p=paths, f=other: f(p))]
        variants.append((SERVICE, lambda rep, p=paths: timed_upload(service, p, categories)))
        runs = alternate(args.reps, variants, warmup=args.warmup)
        nbytes = sum(p.stat().st_size for p in paths)
        summarize(report, label, runs, nbytes, baseline, SERVICE, target)
        if label == single:
            check_temp(report, "S3 upload", runs[SERVICE])
    client.close()


def downloads(
    report: Report, args: argparse.Namespace, service: Service, forwarder: Server, big: Path
) -> str:
    """200 MiB (token and public) and Range 1 MiB against the forwarder's presigned read;
    returns the id of the uploaded record (reused by the memory scenario)."""
    [record_id] = service.upload([big])["ids"]
    import psycopg

    with psycopg.connect(args.database_url) as conn:
        query = "SELECT stored_path FROM file_records WHERE id = %s"
        key = conn.execute(query, (record_id,)).fetchone()[0]
    size = big.stat().st_size
    base = service.server.base_url
    urls = {
        FORWARDER: (f"{forwarder.base_url}/s3?key={quote(key)}", []),
        "service download": (f"{base}/api/files/{record_id}/download", service.auth),
        "service public download": (f"{base}/api/public/files/{record_id}/download", []),
    }

    def whole(name: str) -> dict[str, Any]:
        url, headers = urls[name]
        [record] = curl([*headers, "-o", os.devnull, url])
        if record["http_code"] != 200 or record["size_download"] != size:
            raise RuntimeError(f"{name}: {record['http_code']}, {record['size_download']} bytes")
        return {"seconds": record["time_total"]}

    log(f"download 1 x {args.big_mib} MiB")
    runs = alternate(args.reps, [(n, lambda rep, n=n: whole(n)) for n in urls], warmup=args.warmup)
    for label, name in (
        (f"download 1 x {args.big_mib} MiB (token)", "service download"),
        (f"public download 1 x {args.big_mib} MiB", "service public download"),
    ):
        variant = {k: runs[k] for k in (FORWARDER, name)}
        summarize(report, label, variant, size, FORWARDER, name, FORWARDER_TARGET)

    rng = random.Random(42)
    offsets = [rng.randrange(0, size - MiB) for _ in range(args.slices)]

    def slices(name: str) -> dict[str, Any]:
        url, headers = urls[name]
        chain: list[str] = []
        for i, start in enumerate(offsets):
            chain += ["--next"] if i else []
            chain += [*headers, "-H", "Expect:", "-r", f"{start}-{start + MiB - 1}"]
            chain += ["-w", "%{json}\n", "-o", os.devnull, url]
        records = curl(chain)
        bad = [r for r in records if r["http_code"] != 206 or r["size_download"] != MiB]
        if bad or len(records) != len(offsets):
            raise RuntimeError(f"{name}: range answers {bad[:1]}")
        return {"seconds": sum(r["time_total"] for r in records)}

    log(f"range requests: {args.slices} x 1 MiB")
    names = (FORWARDER, "service download")
    runs = alternate(
        args.reps, [(n, lambda rep, n=n: slices(n)) for n in names], warmup=args.warmup
    )
    label = f"Range {args.slices} x 1 MiB"
    summarize(
        report, label, runs, args.slices * MiB, FORWARDER, "service download", FORWARDER_TARGET
    )
    return record_id


def local_uploads(report: Report, args: argparse.Namespace, files: dict, workdir: Path) -> None:
    """1 x 200 MiB and 25 x 8 MiB to the local backend against bench/bare.py (target 0.8)."""
    postgres = Postgres()
    try:
        url = postgres.create("bench_transfer_local")
        storage_root = workdir / "local-storage"
        storage = {"STORAGE_BACKEND": "local", "STORAGE_LOCAL_ROOT": str(storage_root)}
        env = app_env(url, storage, workdir / "local-tmp")
        prepare_database(env)
        make_user(env, EMAIL, PASSWORD)
        server = app_server("app-local", env, workdir)
        bare_dir = workdir / "bare-target"
        bare = bare_server("bare", workdir, bare_dir)
        try:
            service = Service(server, login(server.port, EMAIL, PASSWORD), workdir)
            categories = {"spool": Path(env["TMPDIR"]), "storage_tmp": storage_root / ".tmp"}

            def bare_upload(paths: list[Path]) -> dict[str, Any]:
                out = workdir / "bare-answer.json"
                [record] = curl([*file_args(paths), "-o", str(out), f"{bare.base_url}/upload"])
                if record["http_code"] != 201:
                    raise RuntimeError(f"bare upload answered {record['http_code']}")
                for leftover in bare_dir.iterdir():
                    leftover.unlink()
                return {"seconds": record["time_total"], "bytes_sent": record["size_upload"]}

            single = f"upload 1 x {args.big_mib} MiB to local"
            many = f"upload {args.small_count} x {args.small_mib} MiB to local"
            for label, paths in ((single, [files["big"]]), (many, files["small"])):
                log(label)
                runs = alternate(
                    args.reps,
                    [(BARE, lambda rep, p=paths: bare_upload(p)),
                     (SERVICE, lambda rep, p=paths: timed_upload(service, p, categories))],
                    warmup=args.warmup,
                )  # fmt: skip
                nbytes = sum(p.stat().st_size for p in paths)
                summarize(report, label, runs, nbytes, BARE, SERVICE, 0.8)
                if label == single:
                    check_temp(report, "local upload", runs[SERVICE])
        finally:
            server.stop()
            bare.stop()
    finally:
        postgres.drop_all()


def memory(
    report: Report, args: Any, env: dict, workdir: Path, files: dict, record_id: str, token: str,
    without: str = "",
) -> None:  # fmt: skip
    """Three clients at once against a freshly started, warmed-up server (``without``:
    mechanisms taken out, for bench.ablation)."""
    results = []
    for rep in range(args.reps):
        server = app_server(f"app-memory-{rep}", env, workdir, without=without)
        try:
            service = Service(server, token, workdir)
            # Warm-up: every code path of the scenario once, so that imports and caches
            # filled on first use count as idle, not as growth.
            small = service.upload(files["small"][:2])
            service.delete(small["ids"])
            download = f"{server.base_url}/api/files/{record_id}/download"
            curl([*service.auth, "-o", os.devnull, "-r", "0-1023", download])
            time.sleep(1.0)
            idle = proc_status(server.pid)["VmRSS"]
            hwm_reset = reset_peak_rss(server.pid)
            out = [workdir / f"memory-{rep}-{i}.json" for i in range(3)]
            commands = [
                [*service.auth, *file_args(files["small"]), "-o", str(out[0])],
                [*service.auth, *file_args([files["big"]]), "-o", str(out[1])],
                [*service.auth, "-o", os.devnull],
            ]
            urls = [f"{server.base_url}/api/files"] * 2 + [download]
            categories = {"spool": Path(env["TMPDIR"])}
            with Sampler(server.pid, interval=0.01, file_categories=categories) as sampler:
                began = time.perf_counter()
                command = ["curl", "-sS", "-H", "Expect:", "-w", "%{json}\n"]
                clients = [
                    subprocess.Popen([*command, *cmd, url], stdout=subprocess.PIPE, text=True)
                    for cmd, url in zip(commands, urls, strict=True)
                ]
                answers = [json.loads(c.communicate(timeout=900)[0]) for c in clients]
                wall = time.perf_counter() - began
            status = proc_status(server.pid)
            peak = max(sampler.peak_rss, status["VmHWM"] if hwm_reset else 0)
            codes = [a["http_code"] for a in answers]
            if codes != [201, 201, 200]:
                raise RuntimeError(f"memory scenario answered {codes}")
            for path in out[:2]:
                service.delete([item["id"] for item in json.loads(path.read_text())["files"]])
            spool = sampler.peak_files().get("spool", 0)
            results.append({"idle_rss": idle, "peak_rss": peak, "growth": peak - idle})
            results[-1] |= {"hwm_reset": hwm_reset, "wall_seconds": wall, "spool_peak": spool}
            print(f"  rep {rep + 1}: idle {idle / MiB:.1f} MiB, peak {peak / MiB:.1f} MiB, "
                  f"spool peak {spool / MiB:.1f} MiB, {wall:.2f} s")  # fmt: skip
        finally:
            server.stop()
    report.data["memory"] = results
    worst = max(r["growth"] for r in results) / MiB
    report.check("memory: peak RSS - idle RSS (worst repetition)", worst, 64, False, " MiB")


# --- main -------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description="Upload/download throughput and memory.")
    parser.add_argument("--big-mib", type=int, default=200, help="the single file [200]")
    parser.add_argument("--small-mib", type=int, default=8, help="each of the many files [8]")
    parser.add_argument("--small-count", type=int, default=25, help="how many [25]")
    # Five, not three: the disk's write-back and SeaweedFS move single runs by half.
    parser.add_argument("--reps", type=int, default=5, help="repetitions (>= 3) [5]")
    parser.add_argument("--warmup", type=int, default=1, help="unrecorded runs first [1]")
    parser.add_argument("--slices", type=int, default=64, help="1 MiB Range requests [64]")
    parser.add_argument("--only", default=",".join(PARTS), help=f"subset of {','.join(PARTS)}")
    parser.add_argument("--keep", action="store_true", help="keep the work folder and logs")
    args = parser.parse_args()
    report = Report("transfer", vars(args).copy())

    with contextlib.ExitStack() as stack:
        workdir = stack.enter_context(workspace("transfer", keep=args.keep))
        log(f"work folder {workdir}")
        small = [workdir / f"small-{i:02d}.mp4" for i in range(args.small_count)]
        files = {"big": write_mp4(workdir / "big.mp4", args.big_mib * MiB)}
        files["small"] = [write_mp4(path, args.small_mib * MiB) for path in small]
        s3 = start_s3(workdir)
        stack.callback(s3.stop)
        bucket = f"bench-{uuid.uuid4().hex[:12]}"
        s3_client(s3).create_bucket(Bucket=bucket)
        postgres = Postgres()
        stack.callback(postgres.drop_all)
        args.database_url = postgres.create("bench_transfer")
        env = app_env(args.database_url, s3_settings(s3, bucket), workdir / "app-tmp")
        prepare_database(env)
        make_user(env, EMAIL, PASSWORD)
        server = app_server("app-s3", env, workdir)
        stack.callback(server.stop)
        token = login(server.port, EMAIL, PASSWORD)
        service = Service(server, token, workdir)

        parts = set(args.only.split(","))
        forwarder = None
        if parts & {"s3-uploads", "downloads"}:
            forwarder = bare_server("forwarder", workdir, s3=s3_settings(s3, bucket))
            stack.callback(forwarder.stop)
        if "s3-uploads" in parts:
            s3_uploads(report, args, service, forwarder, s3, bucket, files)
        if "downloads" in parts:
            record_id = downloads(report, args, service, forwarder, files["big"])
        else:
            [record_id] = service.upload([files["big"]])["ids"]
        server.stop()
        if forwarder is not None:
            forwarder.stop()
        if "memory" in parts:
            log("memory: 3 clients at once (upload many, upload one, download one)")
            memory(report, args, env, workdir, files, record_id, token)
        if "local-uploads" in parts:
            local_uploads(report, args, files, workdir)
        shutil.rmtree(workdir / "seaweedfs" / "data", ignore_errors=True)
    report.params.pop("database_url", None)
    report.save(latest=set(args.only.split(",")) == set(PARTS))


if __name__ == "__main__":
    main()
