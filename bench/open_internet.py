"""The open-internet scenarios at full size, against `flask serve` on the default stack
(SQLite, local storage) with production settings but shortened timeouts (the archive readers
run with the production `CLIENT_STALL_SECONDS`: a reader at 50 KB/s whose receive buffer has
grown to megabytes leaves the TCP window shut for longer than 10 s):

1. 200 clients download a 20 MiB file at 50 KB/s and 20 stall; /healthz, a token login and a
   metadata read p99 under 1 s; memory over idle at most 1 MiB per client; stalled ones cut
   off after CLIENT_STALL_SECONDS, slow ones never.
2. 1,000 connections trickle a header line every 2 s: a new client p99 under 1 s, and they
   are closed after HEADER_TIMEOUT_SECONDS.
3. 100 unauthenticated 1 GiB bodies at once: every one 401, at most 1 MiB spooled each.
4. Issue 21: 100 anonymous readers at 50 KB/s of a 1,000-record folder ZIP (maximal metadata):
   at most 1 MiB each over idle, a public list p99 under 1 s, no reader cut.
5. 2,000 records PATCHed to paths 126 folders deep (about 252,000 OAI-PMH sets), 16 ListSets
   harvesters: at most 1 MiB each over idle, a public list p99 under 1 s.

    .venv/bin/python -m bench.open_internet [--slow 200] [--stalled 20] [--flood 1000]
    .venv/bin/python -m bench.open_internet --only archive [--archive-readers 100]
    .venv/bin/python -m bench.open_internet --only sets [--set-records 2000] [--set-clients 16]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import re
import socket
import time
from pathlib import Path
from typing import Any

from bench.common import (
    JSON,
    MiB,
    Report,
    Sampler,
    app_server,
    curl,
    log,
    login,
    make_user,
    median,
    open_file_usage,
    percentile,
    prepare_database,
    proc_status,
    request,
    sqlite_env,
    workspace,
)

FILE_MIB = 20
STALL_SECONDS = 10
HEADER_SECONDS = 5


async def slow_reader(port: int, path: str, rate: int, stop: asyncio.Event, stats: dict) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 16)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
    await writer.drain()
    step = rate // 10
    received = 0
    began = time.monotonic()
    try:
        while not stop.is_set():
            data = await reader.read(step)
            if not data:
                stats["closed"] += 1
                break
            received += len(data)
            await asyncio.sleep(0.1)
    finally:
        stats["bytes"] += received
        stats["seconds"] += time.monotonic() - began
        writer.close()


def stalled_client(port: int, path: str) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
    return sock


async def probe(port: int, method: str, path: str, body: bytes | None, headers: dict) -> float:
    began = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"{method} {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n"
    for name, value in headers.items():
        head += f"{name}: {value}\r\n"
    if body is not None:
        head += f"Content-Length: {len(body)}\r\n"
    writer.write(head.encode() + b"\r\n" + (body or b""))
    await writer.drain()
    answer = await reader.read()
    writer.close()
    status = int(answer.split(b" ", 2)[1])
    if status >= 400:
        raise RuntimeError(f"{path}: {status}")
    return time.monotonic() - began


async def list_probes(port: int, seconds: float) -> list[float]:
    """Public list requests, one every 0.2 s, for `seconds`: their times."""
    timings: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        timings.append(await probe(port, "GET", "/api/public/files", None, {}))
        await asyncio.sleep(0.2)
    return timings


def stats_of(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50": median(values), "p99": percentile(values, 99)}


async def probes(port: int, record_id: str, login_body: bytes, seconds: float) -> dict:
    requests = {
        "healthz": ("GET", "/healthz", None, {}),
        "login": ("POST", "/api/tokens", login_body, JSON),
        "metadata": ("GET", f"/api/public/files/{record_id}", None, {}),
    }
    timings: dict[str, list[float]] = {name: [] for name in requests}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for name, arguments in requests.items():
            timings[name].append(await probe(port, *arguments))
        await asyncio.sleep(0.2)
    return timings


def socket_closed(sock: socket.socket) -> bool:
    """Whether the server has closed this connection (reading what is left in its buffer)."""
    # Only for connections that are not stalled on purpose: this reads.
    sock.setblocking(False)
    try:
        while True:
            data = sock.recv(1 << 20)
            if not data:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def drain_until_closed(sock: socket.socket, timeout: float) -> tuple[int, bool]:
    """Read what the server had sent; (bytes, whether the server had closed the connection)."""
    sock.settimeout(timeout)
    received = 0
    try:
        while data := sock.recv(1 << 20):
            received += len(data)
    except TimeoutError:
        return received, False
    except OSError:
        pass
    return received, True


async def slow_and_stalled(
    report: Report, server: Any, record_id: str, login_body: bytes, args: Any
) -> None:
    port, pid = server.port, server.pid
    path = f"/api/public/files/{record_id}/download"
    idle = proc_status(pid)["VmRSS"]
    stop = asyncio.Event()
    stats = {"bytes": 0, "seconds": 0.0, "closed": 0}
    server.access_entries()  # skip what came before
    readers = [
        asyncio.create_task(slow_reader(port, path, args.rate, stop, stats))
        for _ in range(args.slow)
    ]
    stalled = [stalled_client(port, path) for _ in range(args.stalled)]
    stalled_at = time.monotonic()
    await asyncio.sleep(3)
    with Sampler(pid, interval=0.1) as steady:
        await asyncio.sleep(2)
    timings = await probes(port, record_id, login_body, args.probe_seconds)
    await asyncio.sleep(max(0.0, stalled_at + STALL_SECONDS + 4 - time.monotonic()))
    cut_off = [drain_until_closed(sock, 5) for sock in stalled]
    for sock in stalled:
        sock.close()
    stop.set()
    await asyncio.gather(*readers)
    stalled_durations = sorted(
        entry["duration_ms"] / 1000
        for entry in server.access_entries()
        if entry["path"] == path and entry["bytes"] < FILE_MIB * MiB
    )[: args.stalled]
    clients = args.slow + args.stalled
    per_client = (steady.peak_rss - idle) / clients
    rate = stats["bytes"] / stats["seconds"] if stats["seconds"] else 0.0
    closed = sum(1 for received, was_closed in cut_off if was_closed and received < FILE_MIB * MiB)
    report.data["slow"] = {"rate_per_slow_client_bytes_s": rate, "idle_rss": idle,
                           "rss_per_client": per_client, "stalled_cut_off": closed,
                           "stalled_served_seconds": stalled_durations,
                           "probes": {n: stats_of(v) for n, v in timings.items()}}  # fmt: skip
    log(f"slow readers got {rate / 1000:.1f} KB/s each; {stats['closed']} were disconnected")
    log(f"stalled downloads ended by the server after {stalled_durations} s")
    check = report.check
    for name, values in timings.items():
        load = f"{args.slow} slow + {args.stalled} stalled readers"
        check(f"{name} p99 with {load}", percentile(values, 99), 1.0, False, " s")
    per_client_mib = per_client / MiB
    check("memory per slow or stalled client (steady, over idle)", per_client_mib, 1, False, " MiB")
    check("slow readers disconnected", stats["closed"], 0, False)
    check(f"stalled readers cut off after {STALL_SECONDS} s", closed, args.stalled, True)
    # Counted from the request: a stalled client still takes what fits into the socket
    # buffers for its first seconds, and the idle check runs once a second.
    longest, limit = max(stalled_durations, default=float("inf")), STALL_SECONDS + 8
    check("longest a stalled download was kept, from its request", longest, limit, False, " s")


async def flood(report: Report, port: int, args: Any) -> None:
    socks = []
    for _ in range(args.flood):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        socks.append(sock)
    began = time.monotonic()
    latencies: list[float] = []
    line = 0
    while time.monotonic() - began < HEADER_SECONDS + 3:
        if line == 0 or time.monotonic() - began > 2 * line:
            for sock in socks:
                try:
                    sock.sendall(f"X-Trickle-{line}: 1\r\n".encode())
                except OSError:
                    pass
            line += 1
        latencies.append(await probe(port, "GET", "/healthz", None, {}))
        await asyncio.sleep(0.05)
    closed = 0
    for sock in socks:
        if socket_closed(sock):
            closed += 1
        sock.close()
    report.data["flood"] = {**stats_of(latencies), "closed_after_header_timeout": closed}
    p99 = percentile(latencies, 99)
    report.check(f"new client p99 beside {args.flood} trickling connections", p99, 1.0, False, " s")
    report.check(f"trickling connections closed after {HEADER_SECONDS} s", closed, args.flood, True)


def huge_bodies(report: Report, port: int, pid: int, tmpdir: Path, count: int) -> None:
    socks = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(
            b"POST /api/files HTTP/1.1\r\nHost: bench\r\nContent-Length: 1073741824\r\n"
            b"Content-Type: multipart/form-data; boundary=x\r\n\r\n" + b"x" * 256 * 1024
        )
        socks.append(sock)
    peak = 0
    statuses = []
    for sock in socks:
        peak = max(peak, sum(open_file_usage(pid, {"tmp": tmpdir}).values()))
        sock.settimeout(10)
        try:
            statuses.append(int(sock.recv(64).split(b" ", 2)[1]))
        except (OSError, IndexError, ValueError):
            statuses.append(0)
        sock.close()
    report.data["spool"] = {"requests": count, "statuses": statuses, "peak_spooled": peak}
    answered = statuses.count(401)
    report.check(f"{count} unauthenticated 1 GiB bodies answered 401", answered, count, True)
    report.check("spooled per unauthenticated request", peak / count / MiB, 1.0, False, " MiB")


#: The archived folder: a path at its maximum length (255 characters).
ARCHIVE_PATH = "archiv/" + "/".join(["abcdefghij" * 4] * 6)[: 255 - len("archiv/")].rstrip("/")
#: Every text field at its maximum length, in a character UTF-8 needs three bytes for.
MAXIMAL_TEXT = {
    name: "€" * 255
    for name in (
        "titel",
        "autoren",
        "sachschlagwoerter",
        "org_themen",
        "aktiv_id",
        "reprotyp",
        "erstellt_von",
        "freigegeben_von",
    )
}
FILES_PER_UPLOAD = 25


def archived_folder(port: int, token: str, workdir: Path, records: int) -> None:
    """`records` released records with maximal metadata and long names, 10 bytes each."""
    sources = []
    for n in range(FILES_PER_UPLOAD):
        source = workdir / f"{n:02d}.txt"
        source.write_bytes(b"archived!\n")
        sources.append(source)
    fields = [*(f"{k}={v}" for k, v in MAXIMAL_TEXT.items()), "beschreibung=" + "€" * 5000]
    fields.append(f"path={ARCHIVE_PATH}")
    answer = workdir / "archived.json"
    for start in range(0, records, FILES_PER_UPLOAD):
        count = min(FILES_PER_UPLOAD, records - start)
        args = ["-H", f"Authorization: Bearer {token}", "-o", str(answer)]
        for field in fields:
            args += ["--form-string", field]
        for n in range(count):
            name = f"{start + n:04d}-" + "bericht" * 35 + ".txt"  # 254 characters
            args += ["-F", f"files[]=@{sources[n]};filename={name}"]
        [record] = curl([*args, f"http://127.0.0.1:{port}/api/files"])
        if record["http_code"] != 201:
            raise RuntimeError(f"upload answered {record['http_code']}: {answer.read_text()}")


async def archive_reader(port: int, path: str, rate: int, stop: asyncio.Event, stats: dict):
    """Reads the archive at `rate` bytes/s until `stop`, then the rest at full speed: a
    connection the server closed ends before the archive's `Content-Length` (the reader
    would notice only after its megabytes of buffers, so only reading to the end tells)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 16)
    request = f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
    writer.write(request.encode())
    await writer.drain()
    head, body, length = b"", 0, None
    try:
        while data := await reader.read(rate // 10 if not stop.is_set() else 1 << 20):
            stats["bytes"] += len(data)
            if length is not None:
                body += len(data)
            else:
                head += data
                if b"\r\n\r\n" in head:
                    head, _, rest = head.partition(b"\r\n\r\n")
                    stats["started"] += 1
                    stats["failed"] += not head.startswith(b"HTTP/1.1 200")
                    found = re.search(rb"(?im)^content-length: *(\d+)", head)
                    length, body = int(found.group(1)) if found else -1, len(rest)
            if not stop.is_set():
                await asyncio.sleep(0.1)
    finally:
        writer.close()
    stats["closed"] += length is None or body != length


async def archive_readers(report: Report, server: Any, args: Any) -> None:
    port, pid = server.port, server.pid
    path = f"/api/public/files.zip?path={ARCHIVE_PATH}"
    idle = proc_status(pid)["VmRSS"]
    stop = asyncio.Event()
    stats = {"started": 0, "failed": 0, "closed": 0, "bytes": 0}
    began = time.monotonic()
    readers = [
        asyncio.create_task(archive_reader(port, path, args.rate, stop, stats))
        for _ in range(args.archive_readers)
    ]
    while stats["started"] < args.archive_readers and time.monotonic() - began < 600:
        await asyncio.sleep(0.1)
    all_started = time.monotonic() - began
    await asyncio.sleep(2)
    with Sampler(pid, interval=0.1) as steady:
        await asyncio.sleep(2)
    with Sampler(pid, interval=0.2) as sampler:
        timings = await list_probes(port, args.probe_seconds)
    stop.set()
    await asyncio.gather(*readers)
    per_client = (max(steady.peak_rss, sampler.peak_rss) - idle) / args.archive_readers
    report.data["archive"] = {**stats, "seconds_until_all_started": all_started,
                              "idle_rss": idle, "rss_per_client": per_client,
                              "list_probes": stats_of(timings)}  # fmt: skip
    log(
        f"{stats['started']} archive readers started within {all_started:.1f} s, "
        f"{stats['failed']} failed, {stats['closed']} cut short; "
        f"{per_client / 2**20:.2f} MiB each"
    )
    check = report.check
    check(f"memory per reader of a {args.archive_records}-record archive (over idle)",
          per_client / 2**20, 1.0, False, " MiB")  # fmt: skip
    p99 = percentile(timings, 99)
    check(f"public list p99 with {args.archive_readers} archive readers", p99, 1.0, False, " s")
    check("archive readers answered 200 and never cut", stats["failed"] + stats["closed"], 0, False)


# --- deep-path set bloat (issue 21) ------------------------------------------------------

SET_DEPTH = 126  # a 4-character first segment and 125 one-character ones: 254 characters


def deep_path(index: int) -> str:
    """A path of its own for each record at every depth: every folder of it is a new set."""
    first = f"{index:04x}"[-4:]
    return "/".join([first, *("abcdefghijklmnopqrstuvwxyz"[(index + j) % 26] for j in range(125))])


def bloat_sets(port: int, token: str, records: int) -> None:
    """`records` files uploaded 25 a request, each then PATCHed to a path of its own, as one
    normal user can (the rate limit raised for the bench)."""
    from tests.support.api import encode_multipart

    auth = {"Authorization": f"Bearer {token}"}
    ids: list[str] = []
    while len(ids) < records:
        batch = min(25, records - len(ids))
        content_type, body = encode_multipart(
            [("files[]", f"f{len(ids) + i}.txt", b"x\n", "text/plain") for i in range(batch)]
        )
        status, _, data = request(
            port, "POST", "/api/files", body, {**auth, "Content-Type": content_type}
        )
        if status != 201:
            raise RuntimeError(f"upload answered {status}: {data[:200]!r}")
        ids += [record["id"] for record in json.loads(data)["files"]]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    began = time.monotonic()
    for index, record_id in enumerate(ids):
        body = json.dumps({"path": deep_path(index)}).encode()
        conn.request("PATCH", f"/api/files/{record_id}", body, {**auth, **JSON})
        answer = conn.getresponse()
        answer.read()
        if answer.status != 200:
            raise RuntimeError(f"PATCH answered {answer.status}")
    conn.close()
    log(f"{records} records PATCHed to {SET_DEPTH}-deep paths in {time.monotonic() - began:.1f} s")


async def harvest_sets(port: int, stop: asyncio.Event, stats: dict) -> None:
    """One harvester: ListSets page after page, from the start again at the end."""
    token = None
    while not stop.is_set():
        query = f"verb=ListSets&resumptionToken={token}" if token else "verb=ListSets"
        began = time.monotonic()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            f"GET /oai?{query} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode()
        )
        await writer.drain()
        answer = await reader.read()
        writer.close()
        stats["pages"].append(time.monotonic() - began)
        stats["bytes"] = max(stats["bytes"], len(answer))
        found = re.search(rb"<resumptionToken[^>]*>([^<]+)</resumptionToken>", answer)
        token = found.group(1).decode() if found else None
        if token is None:
            stats["complete"] += 1


async def set_bloat_under_load(report: Report, server: Any, args: Any) -> None:
    port, pid = server.port, server.pid
    idle = proc_status(pid)["VmRSS"]
    stop = asyncio.Event()
    stats = [{"pages": [], "bytes": 0, "complete": 0} for _ in range(args.set_clients)]
    harvesters = [asyncio.create_task(harvest_sets(port, stop, s)) for s in stats]
    with Sampler(pid, interval=0.1) as sampler:
        lists = await list_probes(port, args.probe_seconds)
        stop.set()
        await asyncio.gather(*harvesters)
    pages = [seconds for s in stats for seconds in s["pages"]]
    per_client = (sampler.peak_rss - idle) / args.set_clients
    largest = max(s["bytes"] for s in stats)
    report.data["set_bloat"] = {"idle_rss": idle, "rss_per_client": per_client,
                                "listsets_pages": stats_of(pages), "largest_page_bytes": largest,
                                "public_list": stats_of(lists)}  # fmt: skip
    log(f"{len(pages)} ListSets pages by {args.set_clients} clients, p50 {median(pages):.3f} s,"
        f" largest {largest} bytes")  # fmt: skip
    n = args.set_clients
    report.check(f"memory per concurrent ListSets client ({n}, over idle)",
                 per_client / 2**20, 1.0, False, " MiB")  # fmt: skip
    p99 = percentile(lists, 99)
    report.check(f"public list p99 with {n} ListSets harvesters", p99, 1.0, False, " s")


def deep_path_sets(report: Report, args: Any) -> None:
    """Deep-path set bloat with concurrent ListSets: one normal user gives `--set-records`
    records paths 126 folders deep (about 126 sets each), then `--set-clients` anonymous
    harvesters page through ListSets while a public list request is timed."""
    with workspace("open-internet-sets", keep=args.keep) as workdir:
        env = sqlite_env(workdir, RATELIMIT_WRITES="100000 per minute")
        prepare_database(env)
        make_user(env, "sets@example.org", "bench-password")
        # 16 ListSets at once from one address: app/fairness.py would refuse all but one.
        server = app_server("sets", env, workdir, without="heavy-gate")
        try:
            token = login(server.port, "sets@example.org", "bench-password")
            bloat_sets(server.port, token, args.set_records)
            asyncio.run(set_bloat_under_load(report, server, args))
        finally:
            server.stop()


SCENARIOS = ("slow", "flood", "spool", "archive", "sets")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slow", type=int, default=200)
    parser.add_argument("--stalled", type=int, default=20)
    parser.add_argument("--rate", type=int, default=50_000, help="bytes/s of a slow reader")
    parser.add_argument("--probe-seconds", type=float, default=20)
    parser.add_argument("--flood", type=int, default=1000)
    parser.add_argument("--huge", type=int, default=100)
    parser.add_argument("--archive-records", type=int, default=1000)
    parser.add_argument("--archive-readers", type=int, default=100)
    parser.add_argument("--set-records", type=int, default=2000)
    parser.add_argument("--set-clients", type=int, default=16)
    parser.add_argument(
        "--only", action="append", choices=SCENARIOS, help="run these scenarios (repeatable)"
    )
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    run = set(args.only or SCENARIOS)
    report = Report("open_internet", vars(args))
    with workspace("open-internet", keep=args.keep) as workdir:
        timeouts = {"CLIENT_STALL_SECONDS": str(STALL_SECONDS)}
        timeouts["HEADER_TIMEOUT_SECONDS"] = str(HEADER_SECONDS)
        env = sqlite_env(workdir, **timeouts)
        prepare_database(env)
        make_user(env, "bench@example.org", "bench-password")
        server = app_server("service", env, workdir)
        try:
            token = login(server.port, "bench@example.org", "bench-password")
            video = workdir / "video.txt"
            video.write_bytes((b"0123456789abcdef" * 64 + b"\n") * (FILE_MIB * 1024))
            answer = workdir / "created.json"
            form = ["-H", f"Authorization: Bearer {token}", "-F", f"files[]=@{video}"]
            curl([*form, "-o", str(answer), f"{server.base_url}/api/files"])
            record_id = json.loads(answer.read_text())["files"][0]["id"]
            credentials = {"email": "bench@example.org", "password": "bench-password"}
            login_body = json.dumps({**credentials, "token_name": "b"}).encode()
            if "slow" in run:
                asyncio.run(slow_and_stalled(report, server, record_id, login_body, args))
            if "flood" in run:
                asyncio.run(flood(report, server.port, args))
            if "spool" in run:
                huge_bodies(report, server.port, server.pid, workdir / "tmp", args.huge)
        finally:
            server.stop()
        if "archive" in run:
            # The production stall limit: a reader at 50 KB/s whose receive buffer has grown
            # to megabytes reopens its TCP window only every several seconds, longer than the
            # shortened limit above (a send timeout's nature; nginx's send_timeout alike).
            defaults = {k: v for k, v in env.items() if k != "CLIENT_STALL_SECONDS"}
            server = app_server("service-archive", defaults, workdir)
            try:
                token = login(server.port, "bench@example.org", "bench-password")
                archived_folder(server.port, token, workdir, args.archive_records)
                asyncio.run(archive_readers(report, server, args))
            finally:
                server.stop()
    if "sets" in run:
        deep_path_sets(report, args)
    report.save()


if __name__ == "__main__":
    main()
