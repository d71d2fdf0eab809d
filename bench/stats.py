"""What counting downloads costs the downloads (issue 26): the same service with statistics on
and off (``without="stats"``: `STATS=off`), alternating in one run, each on its own SQLite
database and local storage:

- the throughput of one 200 MiB public download (MiB/s, the median of the repetitions);
- the requests per second of 4 KiB public downloads, 8 clients on keep-alive connections.

Target: both at least 0.97 of the figures without statistics.

    python -m bench.stats [--repetitions 5] [--size-mib 200] [--requests 500]
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time
from pathlib import Path

from bench.common import (
    MiB,
    Server,
    app_env,
    app_server,
    flask_cli,
    log,
    login,
    make_user,
    median,
    prepare_database,
    print_table,
    request,
    workspace,
)

TARGET = 0.97
CLIENTS = 8
CHUNK = 1024 * 1024
BROWSER = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"


def make_files(folder: Path, size_mib: int) -> None:
    """A large CSV (written in chunks, never held whole) and a 4 KiB one."""
    folder.mkdir(parents=True, exist_ok=True)
    line = b"4711,Bericht,2026-11-26,0.97\n"
    with (folder / "large.csv").open("wb") as out:
        block = line * (CHUNK // len(line))
        written = 0
        while written < size_mib * MiB:
            piece = block[: size_mib * MiB - written]
            out.write(piece)
            written += len(piece)
    (folder / "small.csv").write_bytes((line * (4096 // len(line) + 1))[:4096])


def start(name: str, work: Path, files: Path, without: str) -> tuple[Server, dict[str, str]]:
    env = app_env(
        f"sqlite:///{work / name / 'db.sqlite3'}",
        {"STORAGE_BACKEND": "local", "STORAGE_LOCAL_ROOT": str(work / name / "storage")},
        work / name / "tmp",
    )
    (work / name).mkdir(parents=True, exist_ok=True)
    prepare_database(env)
    make_user(env, "bench@example.org", "bench-password")
    flask_cli("import", str(files), "--owner", "bench@example.org", env=env, timeout=900)
    server = app_server(name, env, work, without=without)
    token = login(server.port, "bench@example.org", "bench-password")
    status, _, body = request(
        server.port, "GET", "/api/files", headers={"Authorization": f"Bearer {token}"}
    )
    if status != 200:
        raise RuntimeError(f"list failed: {status}")
    ids = {r["original_name"]: r["id"] for r in json.loads(body)["data"]}
    return server, ids


def large_download(server: Server, record_id: str) -> float:
    """MiB/s of one whole download, read in 1 MiB pieces."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
    began = time.perf_counter()
    conn.request("GET", f"/api/public/files/{record_id}/download", headers={"User-Agent": BROWSER})
    response = conn.getresponse()
    received = 0
    while piece := response.read(CHUNK):
        received += len(piece)
    elapsed = time.perf_counter() - began
    conn.close()
    if response.status != 200:
        raise RuntimeError(f"download failed: {response.status}")
    return received / MiB / elapsed


def small_rate(server: Server, record_id: str, requests: int) -> float:
    """Requests per second of all clients together; each client is another browser."""
    errors: list[int] = []
    barrier = threading.Barrier(CLIENTS + 1)

    def client(n: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        headers = {"User-Agent": f"{BROWSER} client/{n}"}
        barrier.wait()
        for _ in range(requests):
            conn.request("GET", f"/api/public/files/{record_id}/download", headers=headers)
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                errors.append(response.status)
        conn.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    barrier.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    if errors:
        raise RuntimeError(f"{len(errors)} downloads failed: {errors[:5]}")
    return CLIENTS * requests / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--size-mib", type=int, default=200)
    parser.add_argument("--requests", type=int, default=500, help="per client and repetition")
    args = parser.parse_args()

    with workspace("stats") as work:
        files = work / "files"
        make_files(files, args.size_mib)
        servers: dict[str, tuple[Server, dict[str, str]]] = {}
        throughput: dict[str, list[float]] = {"on": [], "off": []}
        rates: dict[str, list[float]] = {"on": [], "off": []}
        try:
            for stats in ("on", "off"):
                without = "" if stats == "on" else "stats"
                servers[stats] = start(f"stats-{stats}", work, files, without)
            for repetition in range(args.repetitions):
                order = ["on", "off"] if repetition % 2 == 0 else ["off", "on"]
                for stats in order:
                    server, ids = servers[stats]
                    throughput[stats].append(large_download(server, ids["large.csv"]))
                    rates[stats].append(small_rate(server, ids["small.csv"], args.requests))
                    log(
                        f"statistics {stats}: {throughput[stats][-1]:.0f} MiB/s, "
                        f"{rates[stats][-1]:.0f} req/s"
                    )
        finally:
            for server, _ in servers.values():
                server.stop()

    rows, verdicts = [], []
    for what, figures, unit in (
        (f"{args.size_mib} MiB download", throughput, "MiB/s"),
        ("4 KiB downloads", rates, "req/s"),
    ):
        on, off = median(figures["on"]), median(figures["off"])
        verdicts.append(on / off >= TARGET)
        rows.append([what, f"{on:.0f} {unit}", f"{off:.0f} {unit}", f"{on / off:.3f}"])
    print_table(["measure", "statistics on (median)", "off (median)", "on/off"], rows)
    print(f"target on/off >= {TARGET}: {'PASS' if all(verdicts) else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
