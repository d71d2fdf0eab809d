"""Resumable uploads and folder archives (issue 14) against the plain endpoints, same server.

- A 200 MiB tus upload in 8 MiB chunks (tuspy, the tus project's Python client: one PATCH
  per chunk, each body read into memory by the client) against the same file through
  `POST /api/files` (curl, streamed from disk). Target: tus reaches 0.8 of the plain upload's
  throughput.
- A ZIP of 10 x 20 MiB (`GET /api/files.zip`) against downloading the same ten files one by
  one (one curl, ten URLs, one kept-alive connection). Target: 0.9 of the one-by-one
  throughput.
- Peak RSS of the server during each, against its idle RSS after a warm-up (target: at most
  64 MiB more).

Stacks: `local` (SQLite + local folder) and `s3` (PostgreSQL + SeaweedFS).

    .venv/bin/python -m bench.resumable [--stacks local,s3] [--reps 3] [--big-mib 200]
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from bench.common import (
    MiB,
    Postgres,
    Report,
    Sampler,
    alternate,
    app_env,
    app_server,
    curl,
    log,
    login,
    make_user,
    median,
    prepare_database,
    print_table,
    proc_status,
    s3_client,
    s3_settings,
    sqlite_env,
    start_s3,
    workspace,
)

EMAIL, PASSWORD = "bench@example.org", "bench passphrase"
CHUNK = 8 * MiB


def write_text(path: Path, size: int, seed: str) -> Path:
    """Plain text (detected as text/plain), different per file."""
    line = (seed * 80)[:79].encode() + b"\n"
    block = line * (MiB // len(line) + 1)
    with path.open("wb") as out:
        left = size
        while left:
            piece = block[: min(len(block), left)]
            out.write(piece)
            left -= len(piece)
    return path


class Client:
    def __init__(self, base: str, token: str, workdir: Path) -> None:
        self.base = base
        self.token = token
        self.workdir = workdir
        self.auth = ["-H", f"Authorization: Bearer {token}"]

    def post(self, path: Path, folder: str = "bench/post") -> tuple[float, str]:
        out = self.workdir / f"{uuid.uuid4().hex}.json"
        form = ["-F", f"files[]=@{path}", "-F", f"path={folder}"]
        [record] = curl([*self.auth, *form, "-o", str(out), f"{self.base}/api/files"])
        body = json.loads(out.read_text())
        out.unlink()
        if record["http_code"] != 201:
            raise RuntimeError(f"upload answered {record['http_code']}: {body}")
        return record["time_total"], body["files"][0]["id"]

    def tus(self, path: Path) -> tuple[float, str]:
        from tusclient import client as tus

        headers = {"Authorization": f"Bearer {self.token}"}
        client = tus.TusClient(f"{self.base}/api/uploads", headers=headers)
        metadata = {"filename": path.name, "path": "bench/tus"}
        with path.open("rb") as stream:
            began = time.perf_counter()
            uploader = client.uploader(file_stream=stream, chunk_size=CHUNK, metadata=metadata)
            uploader.upload()
            seconds = time.perf_counter() - began
        return seconds, uploader.request.response_headers["upload-record-id"]

    def delete(self, record_id: str) -> None:
        curl([*self.auth, "-X", "DELETE", "-o", os.devnull, f"{self.base}/api/files/{record_id}"])

    def zip(self, folder: str) -> tuple[float, int]:
        [record] = curl([*self.auth, "-o", os.devnull, f"{self.base}/api/files.zip?path={folder}"])
        assert record["http_code"] == 200, record
        return record["time_total"], record["size_download"]

    def one_by_one(self, ids: list[str]) -> tuple[float, int]:
        args = [*self.auth]
        for record_id in ids:
            args += ["-o", os.devnull, f"{self.base}/api/files/{record_id}/download"]
        began = time.perf_counter()
        records = curl(args)
        seconds = time.perf_counter() - began
        assert all(r["http_code"] == 200 for r in records), records
        return seconds, sum(r["size_download"] for r in records)


def stack_env(stack: str, workdir: Path, databases: Postgres, s3: Any, name: str) -> dict:
    if stack == "s3":
        bucket = f"bench-{uuid.uuid4().hex[:12]}"
        s3_client(s3).create_bucket(Bucket=bucket)
        return app_env(databases.create(name), s3_settings(s3, bucket), workdir / f"tmp-{name}")
    return sqlite_env(workdir)


def measure_stack(stack: str, args: argparse.Namespace, workdir: Path, report: Report) -> None:
    databases = Postgres()
    s3 = None
    try:
        if stack == "s3":
            s3 = start_s3(workdir)
        env = stack_env(stack, workdir, databases, s3, "resumable")
        prepare_database(env)
        make_user(env, EMAIL, PASSWORD)
        server = app_server(f"app-{stack}", env, workdir)
        try:
            client = Client(server.base_url, login(server.port, EMAIL, PASSWORD), workdir)
            big = write_text(workdir / "big.txt", args.big_mib * MiB, "big")
            members = [
                write_text(workdir / f"part-{n}.txt", args.member_mib * MiB, f"m{n}")
                for n in range(args.members)
            ]
            # Warm up both paths, then take the idle RSS.
            for upload in (client.post, client.tus):
                _, record_id = upload(members[0])
                client.delete(record_id)
            ids = [client.post(path, "bench/zip")[1] for path in members]
            client.zip("bench/zip")
            client.one_by_one(ids)
            idle = proc_status(server.pid)["VmRSS"]
            peaks: dict[str, int] = {}

            def sampled(name: str, run: Any) -> Any:
                with Sampler(server.pid) as sampler:
                    result = run()
                peaks[name] = max(peaks.get(name, 0), sampler.peak_rss)
                return result

            def upload(name: str, method: Any) -> float:
                seconds, record_id = sampled(name, lambda: method(big))
                client.delete(record_id)
                return seconds

            uploads = alternate(
                args.reps,
                [(name, lambda _r, n=name, m=method: upload(n, m))
                 for name, method in (("post", client.post), ("tus", client.tus))],
            )  # fmt: skip
            fetches = {"one_by_one": lambda: client.one_by_one(ids)}
            fetches["zip"] = lambda: client.zip("bench/zip")
            downloads = alternate(
                args.reps, [(n, lambda _r, n=n, f=f: sampled(n, f)[0]) for n, f in fetches.items()]
            )
        finally:
            server.stop()
    finally:
        if s3 is not None:
            s3.stop()
        databases.drop_all()

    nbytes = args.big_mib * MiB
    zbytes = args.members * args.member_mib * MiB
    rows = []
    for name, runs, size in (
        ("POST /api/files", uploads["post"], nbytes),
        ("tus, 8 MiB chunks", uploads["tus"], nbytes),
        ("downloads one by one", downloads["one_by_one"], zbytes),
        ("GET /api/files.zip", downloads["zip"], zbytes),
    ):
        rows.append([stack, name, median(runs), size / MiB / median(runs)])
    print_table(["stack", "transfer", "median s", "MiB/s"], rows)
    tus_ratio = median(uploads["post"]) / median(uploads["tus"])
    zip_ratio = median(downloads["one_by_one"]) / median(downloads["zip"])
    report.data[stack] = {"uploads": uploads, "downloads": downloads, "idle_rss": idle}
    report.data[stack] |= {"peak_rss": peaks, "tus_ratio": tus_ratio, "zip_ratio": zip_ratio}
    report.check(f"{stack}: tus throughput / POST throughput", tus_ratio, 0.8, True)
    report.check(f"{stack}: ZIP throughput / one-by-one throughput", zip_ratio, 0.9, True)
    for name, peak in peaks.items():
        growth = (peak - idle) / MiB
        report.check(f"{stack}: peak RSS over idle during {name}", growth, 64, False, " MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stacks", default="local,s3")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--big-mib", type=int, default=200)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--member-mib", type=int, default=20)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    report = Report("resumable", vars(args))
    with workspace("resumable", keep=args.keep) as workdir:
        for stack in args.stacks.split(","):
            log(f"stack {stack}")
            (workdir / stack).mkdir()
            measure_stack(stack, args, workdir / stack, report)
    report.save()


if __name__ == "__main__":
    main()
