"""DOWNLOAD_OFFLOAD=nginx measured (issue 27): docs/nginx.conf run as tests/test_reverse_proxy.py
runs it, in front of two servers on the same database and storage, one with the setting on and
one without (``without_env(env, "offload")``), all contenders alternating in the same run:

- a 200 MiB public download through nginx with offload on, against nginx sending the same
  bytes as a static file (local) or proxied straight from S3 with a presigned URL (s3): the
  ratio should be at least 0.9;
- 64 requests for 1 MiB ranges at spread offsets, one connection: offload on against offload
  off, both through nginx (at least 1.5x faster);
Clients speak plain HTTP to nginx (on 2 cores one nginx worker's encryption would cap every
contender alike).

    .venv/bin/python -m bench.offload [--backend local|s3|both] [--reps 5] [--size-mib 200]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import psycopg

from bench.common import (
    MiB,
    Postgres,
    alternate,
    check_without,
    curl,
    log,
    login,
    make_user,
    median,
    prepare_database,
    print_table,
    s3_client,
    s3_settings,
    sqlalchemy_url,
    start_s3,
    without_env,
    workspace,
)
from bench.transfer import write_mp4
from tests.support.server import clean_env
from tests.test_reverse_proxy import HOST_NAME, Stack, offload_site, running_stack

PEER = "/peer/"
RANGES = 64


def with_peer(site: Callable[[str], str], peer_block: str) -> Callable[[str], str]:
    """The offload example without TLS plus a location that serves the peer's bytes."""

    def change(text: str) -> str:
        text = site(text)
        assert text.count(" ssl default_server;") == 1 and text.count(" ssl;") == 1
        text = text.replace(" ssl default_server;", " default_server;").replace(" ssl;", ";")
        anchor = "    location @too_large {"
        assert text.count(anchor) == 1
        return text.replace(anchor, peer_block + anchor)

    return change


def via_nginx(stack: Stack, path: str) -> list[str]:
    """curl arguments for `path` through nginx, the host name resolved to it."""
    host = f"{HOST_NAME}:{stack.https_port}"
    return ["--resolve", f"{host}:127.0.0.1", f"http://{host}{path}"]


def whole(target: list[str]) -> float:
    """MiB/s of one whole download."""
    (record,) = curl(["-o", os.devnull, "--fail", *target])
    return record["speed_download"] / MiB


def ranges(target: list[str], size: int) -> float:
    """Seconds for RANGES requests of 1 MiB at offsets spread over the file, one connection."""
    url, options = target[-1], target[:-1]
    args: list[str] = []
    step = (size - MiB) // RANGES
    for i in range(RANGES):
        args += ["--next"] if i else []
        args += [*options, "-w", "%{json}\n", "-o", os.devnull, "--fail"]
        args += ["-r", f"{i * step}-{i * step + MiB - 1}", url]
    records = curl(args, timeout=600)
    assert [(r["http_code"], r["size_download"]) for r in records] == [(206, MiB)] * RANGES
    return sum(r["time_total"] for r in records)


@contextmanager
def stacks(
    backend: str, work: Path, size_mib: int
) -> Iterator[tuple[Stack, Stack, str, list[str], int]]:
    """Both stacks, the released record's public path, the peer's target and the file size."""
    with ExitStack() as exits:
        storage_dir = work / "storage"
        storage_dir.mkdir(mode=0o700)
        if backend == "local":
            storage = {"STORAGE_LOCAL_ROOT": str(storage_dir)}
        else:
            server = start_s3(work)
            exits.callback(server.stop)
            client = s3_client(server)
            client.create_bucket(Bucket="offload")
            storage = s3_settings(server, "offload")
        postgres = Postgres()
        exits.callback(postgres.drop_all)
        database = postgres.create("offload")
        base = dict(DATABASE_URL=sqlalchemy_url(database), PROXY_COUNT="1", **storage)
        base.update(RATELIMIT_UPLOADS="1000 per minute")
        env_on = clean_env(**base, DOWNLOAD_OFFLOAD="nginx")
        env_off = without_env(env_on, "offload")
        prepare_database(env_on)
        make_user(env_on, "bench@example.org", "bench password")

        if backend == "local":
            site = offload_site("local", f"{storage_dir}/")
            peer = f"    location {PEER} {{\n        alias {storage_dir}/;\n    }}\n"
        else:
            site = offload_site("s3", f"{server.endpoint_url}/")
            peer = (
                f"    location {PEER} {{\n        proxy_pass {server.endpoint_url}/;\n"
                "        proxy_set_header Host $proxy_host;\n        proxy_buffering off;\n    }\n"
            )
        folders = [work / "nginx-on", work / "nginx-off"]
        for folder in folders:
            folder.mkdir()
        on = exits.enter_context(running_stack(folders[0], env_on, with_peer(site, peer)))
        off = exits.enter_context(running_stack(folders[1], env_off, with_peer(site, peer)))
        check_without(off.app_log, "offload")

        size = size_mib * MiB
        source = write_mp4(work / "large.mp4", size)
        token = login(off.app_port, "bench@example.org", "bench password")
        answer = work / "created.json"
        form = ["-H", f"Authorization: Bearer {token}", "-F", f"files[]=@{source}"]
        curl([*form, "-o", str(answer), f"http://127.0.0.1:{off.app_port}/api/files"])
        record_id = json.loads(answer.read_text())["files"][0]["id"]
        source.unlink()
        with psycopg.connect(database) as conn:
            (key,) = conn.execute("SELECT stored_path FROM file_records").fetchone()
        if backend == "local":
            peer_path = PEER + key
        else:
            url = client.generate_presigned_url(
                "get_object", Params={"Bucket": "offload", "Key": key}, ExpiresIn=3600
            )
            peer_path = PEER + url.split("/", 3)[3]
        path = f"/api/public/files/{record_id}/download"
        yield on, off, path, via_nginx(on, peer_path), size


def run(backend: str, reps: int, size_mib: int) -> list[list[Any]]:
    with (
        workspace(f"offload-{backend}") as work,
        stacks(backend, work, size_mib) as (on, off, path, peer, size),
    ):
        peer_name = "nginx static file" if backend == "local" else "nginx -> S3 (presigned)"
        targets = [
            ("nginx, offload on", via_nginx(on, path)),
            (peer_name, peer),
            ("nginx, offload off", via_nginx(off, path)),
        ]
        log(f"{backend}: {size // MiB} MiB download, {reps} repetitions")
        speeds = alternate(reps, [(n, lambda _r, t=t: whole(t)) for n, t in targets], warmup=1)
        log(f"{backend}: {RANGES} x 1 MiB ranges, {reps} repetitions")
        seconds = alternate(
            reps, [(n, lambda _r, t=t: ranges(t, size)) for n, t in targets], warmup=1
        )
    mib_s = {name: median(values) for name, values in speeds.items()}
    range_s = {name: median(values) for name, values in seconds.items()}
    return [
        [backend, name, mib_s[name], mib_s[name] / mib_s[peer_name], range_s[name] * 1000 / RANGES,
         range_s["nginx, offload off"] / range_s[name]]
        for name, _ in targets
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["local", "s3", "both"], default="both")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--size-mib", type=int, default=200)
    args = parser.parse_args()
    if shutil.which("nginx", path=f"{os.environ.get('PATH', '')}:/usr/sbin") is None:
        raise SystemExit("nginx is not installed")
    rows = []
    for backend in ["local", "s3"] if args.backend == "both" else [args.backend]:
        rows += run(backend, args.reps, args.size_mib)
    headers = ["backend", "contender", "MiB/s (whole)", "vs peer", "ms per 1 MiB range"]
    print_table([*headers, "ranges: x faster than offload off"], rows)


if __name__ == "__main__":
    main()
