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
import time
from pathlib import Path

from bench.common import (
    MiB,
    Server,
    alternate,
    app_server,
    concurrent_rate,
    flask_cli,
    log,
    login,
    make_user,
    median,
    prepare_database,
    print_table,
    request,
    sqlite_env,
    workspace,
)

TARGET = 0.97
CLIENTS = 8
BROWSER = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"


def make_files(folder: Path, size_mib: int) -> None:
    """A large CSV (written in chunks, never held whole) and a 4 KiB one."""
    folder.mkdir(parents=True, exist_ok=True)
    line = b"4711,Bericht,2026-11-26,0.97\n"
    block = line * (MiB // len(line))
    with (folder / "large.csv").open("wb") as out:
        written = 0
        while written < size_mib * MiB:
            written += out.write(block[: size_mib * MiB - written])
    (folder / "small.csv").write_bytes((line * (4096 // len(line) + 1))[:4096])


def start(name: str, work: Path, files: Path, without: str) -> tuple[Server, dict[str, str]]:
    """A server with the files imported; its ids by file name."""
    env = sqlite_env(work / name)
    prepare_database(env)
    make_user(env, "bench@example.org", "bench-password")
    flask_cli("import", str(files), "--owner", "bench@example.org", env=env)
    server = app_server(name, env, work, without=without)
    token = login(server.port, "bench@example.org", "bench-password")
    headers = {"Authorization": f"Bearer {token}"}
    status, _, body = request(server.port, "GET", "/api/files", headers=headers)
    if status != 200:
        raise RuntimeError(f"list failed: {status}")
    return server, {r["original_name"]: r["id"] for r in json.loads(body)["data"]}


def large_download(server: Server, record_id: str) -> float:
    """MiB/s of one whole download, read in 1 MiB pieces."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
    began = time.perf_counter()
    conn.request("GET", f"/api/public/files/{record_id}/download", headers={"User-Agent": BROWSER})
    response = conn.getresponse()
    received = 0
    while piece := response.read(MiB):
        received += len(piece)
    elapsed = time.perf_counter() - began
    conn.close()
    if response.status != 200:
        raise RuntimeError(f"download failed: {response.status}")
    return received / MiB / elapsed


def small_rate(server: Server, record_id: str, requests: int) -> float:
    """Requests per second of all clients together; each client is another browser."""

    def send(conn: http.client.HTTPConnection, n: int, _i: int) -> int:
        headers = {"User-Agent": f"{BROWSER} client/{n}"}
        conn.request("GET", f"/api/public/files/{record_id}/download", headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status

    return concurrent_rate(server.port, CLIENTS, requests, send)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repetitions", type=int, default=5)
    parser.add_argument("--size-mib", type=int, default=200)
    parser.add_argument("--requests", type=int, default=500, help="per client and repetition")
    args = parser.parse_args()

    with workspace("stats") as work:
        make_files(work / "files", args.size_mib)
        servers: dict[str, tuple[Server, dict[str, str]]] = {}
        try:
            for stats, without in (("on", ""), ("off", "stats")):
                servers[stats] = start(f"stats-{stats}", work, work / "files", without)

            def run(stats: str) -> tuple[float, float]:
                server, ids = servers[stats]
                figures = large_download(server, ids["large.csv"])
                figures = (figures, small_rate(server, ids["small.csv"], args.requests))
                log(f"statistics {stats}: {figures[0]:.0f} MiB/s, {figures[1]:.0f} req/s")
                return figures

            runs = alternate(args.repetitions, [(s, lambda _r, s=s: run(s)) for s in servers])
        finally:
            for server, _ in servers.values():
                server.stop()

    rows, verdicts = [], []
    for index, what, unit in ((0, f"{args.size_mib} MiB download", "MiB/s"),
                              (1, "4 KiB downloads", "req/s")):  # fmt: skip
        on, off = (median(run[index] for run in runs[s]) for s in ("on", "off"))
        verdicts.append(on / off >= TARGET)
        rows.append([what, f"{on:.0f} {unit}", f"{off:.0f} {unit}", f"{on / off:.3f}"])
    print_table(["measure", "statistics on (median)", "off (median)", "on/off"], rows)
    print(f"target on/off >= {TARGET}: {'PASS' if all(verdicts) else 'FAIL'}")


if __name__ == "__main__":
    main()
