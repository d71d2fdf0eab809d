"""Shared machinery of the benchmarks: servers, databases, sampling, statistics, results
(bench/README.md)."""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import platform
import re
import runpy
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.support.server import clean_env, free_port

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
WORK = RESULTS / "work"
MiB = 1024 * 1024
PYTHON = sys.executable

#: The server the throwaway databases are made on (libpq URL, user with CREATEDB).
PG_ADMIN_URL = os.environ.get("BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def log(message: str) -> None:
    print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", flush=True)


# --- work folders -----------------------------------------------------------------------


def stamp() -> str:
    return datetime.now().strftime("%Y%m%d-%H%M%S")


@contextlib.contextmanager
def workspace(name: str, keep: bool = False) -> Iterator[Path]:
    """A fresh folder under bench/results/work, removed afterwards unless ``keep``."""
    path = WORK / f"{name}-{stamp()}-{uuid.uuid4().hex[:6]}"
    path.mkdir(parents=True)
    try:
        yield path
    finally:
        if keep:
            log(f"work folder kept: {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


# --- PostgreSQL -------------------------------------------------------------------------


def sqlalchemy_url(url: str) -> str:
    """The app's form of a libpq URL (psycopg 3 driver)."""
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


class Postgres:
    """Throwaway databases on the local server, dropped again on ``drop_all``."""

    def __init__(self, admin_url: str = PG_ADMIN_URL) -> None:
        self.admin_url = admin_url
        self.created: list[str] = []

    def _admin(self) -> Any:
        import psycopg

        return psycopg.connect(self.admin_url, autocommit=True)

    def create(self, prefix: str = "bench") -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.created.append(name)
        return f"{self.admin_url.rpartition('/')[0]}/{name}"

    def drop_all(self) -> None:
        with self._admin() as conn:
            for name in self.created:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.created.clear()


# --- the app and other servers ----------------------------------------------------------


def app_env(database_url: str, storage: dict[str, str], tmpdir: Path, **extra: str) -> dict:
    """Settings of a benchmarked app: its database, storage and a TMPDIR of its own; rate
    limits raised so that repetitions are never refused, all else the production defaults."""
    tmpdir.mkdir(parents=True, exist_ok=True)
    limits = {"RATELIMIT_UPLOADS": "100000 per minute", "RATELIMIT_TOKENS": "100000 per minute"}
    settings = {"DATABASE_URL": sqlalchemy_url(database_url), "TMPDIR": str(tmpdir), **limits}
    return clean_env(**settings, **storage, **extra)


def sqlite_env(workdir: Path, **extra: str) -> dict[str, str]:
    """Settings of an app on SQLite and local storage, both in ``workdir``."""
    storage = {"STORAGE_BACKEND": "local", "STORAGE_LOCAL_ROOT": str(workdir / "storage")}
    return app_env(f"sqlite:///{workdir / 'db.sqlite3'}", storage, workdir / "tmp", **extra)


def migrated_postgres(
    stack: contextlib.ExitStack, name: str, keep: bool = False, postgres: bool = True,
    s3: bool = False, **extra: str,
) -> tuple[Path, str, dict[str, str]]:  # fmt: skip
    """A work folder and a migrated database of a bench (PostgreSQL, or SQLite in the folder),
    removed when `stack` closes unless `keep`, and the app's settings for them (local storage,
    or with `s3` a bucket on a SeaweedFS of its own): (work folder, database URL, settings)."""
    workdir = stack.enter_context(workspace(name, keep=keep))
    storage = {"STORAGE_BACKEND": "local", "STORAGE_LOCAL_ROOT": str(workdir / "storage")}
    if s3:
        server = start_s3(workdir)
        stack.callback(server.stop)
        storage = s3_settings(server, f"bench-{uuid.uuid4().hex[:12]}")
        s3_client(server).create_bucket(Bucket=storage["S3_BUCKET"])
    database_url = f"sqlite:///{workdir / 'db.sqlite3'}"
    if postgres:
        databases = Postgres()
        stack.callback(lambda: None if keep else databases.drop_all())
        database_url = databases.create(f"bench_{name}")
    env = app_env(database_url, storage, workdir / "app-tmp", **extra)
    prepare_database(env)
    return workdir, database_url, env


def flask_cli(*args: str, env: dict[str, str]) -> str:
    """Run a ``flask --app wsgi`` command; fails loudly with its output."""
    command = [PYTHON, "-m", "flask", "--app", "wsgi", *args]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"flask {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def prepare_database(env: dict[str, str]) -> None:
    flask_cli("db", "upgrade", env=env)


@dataclass
class Server:
    """A server in a child process with its output in a log file."""

    name: str
    command: list[str]
    env: dict[str, str]
    log_path: Path
    port: int
    process: subprocess.Popen[bytes] | None = None
    _log_offset: int = 0
    _log_file: Any = field(default=None, repr=False)
    _times: dict[str, float] = field(default_factory=dict, repr=False)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> Server:
        self._log_file = self.log_path.open("wb")
        output = {"stdout": self._log_file, "stderr": subprocess.STDOUT}
        self.process = subprocess.Popen(
            self.command, cwd=ROOT, env=self.env, stdin=subprocess.DEVNULL, **output
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"{self.name} did not start:\n{self.log_path.read_text()[-3000:]}"
                    ) from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def access_entries(self) -> list[dict[str, Any]]:
        """Access-log lines (logger ``app.access``) written since the last call."""
        with self.log_path.open("rb") as file:
            file.seek(self._log_offset)
            data = file.read()
        end = data.rfind(b"\n") + 1
        self._log_offset += end
        entries = []
        for line in data[:end].splitlines():
            with contextlib.suppress(ValueError):
                entries += [json.loads(line)] if line.startswith(b"{") else []
        return [entry for entry in entries if entry.get("logger") == "app.access"]

    def server_times(self, request_ids: Iterable[str], timeout: float = 5.0) -> dict[str, float]:
        """``duration_ms`` of the given requests from the access log, by request id, waiting
        up to ``timeout`` for lines written when waitress closes a response after the client."""
        wanted = set(request_ids)
        deadline = time.monotonic() + timeout
        while True:
            for entry in self.access_entries():
                self._times[entry["request_id"]] = float(entry["duration_ms"])
            if wanted <= self._times.keys() or time.monotonic() > deadline:
                return {rid: self._times[rid] for rid in wanted if rid in self._times}
            time.sleep(0.02)


def app_server(name: str, env: dict[str, str], workdir: Path, without: str = "") -> Server:
    """``flask serve`` (waitress, the production server and settings) on a free port;
    ``without``: mechanisms taken out (``without_env``)."""
    port = free_port()
    command = [PYTHON, "-m", "flask", "--app", "wsgi", "serve", "--port", str(port)]
    server = Server(name, command, without_env(env, without), workdir / f"{name}.log", port)
    server.start()
    try:
        check_without(server.log_path, without)
    except RuntimeError:
        server.stop()
        raise
    return server


# --- with and without a mechanism -------------------------------------------------------

SHIM = ROOT / "bench" / "ablation_shim"


#: What ``--without NAME`` can take out (bench/ablation_shim/sitecustomize.py: a setting of the
#: app where it has one, else a patch in the server child).
WITHOUT = tuple(runpy.run_path(str(SHIM / "sitecustomize.py"), run_name="bench_shim")["KNOWN"])


def without_env(env: dict[str, str], names: str) -> dict[str, str]:
    """The settings of a server without the mechanisms ``names`` (comma-separated; "": none)."""
    if not names:
        return env
    unknown = set(names.split(",")) - set(WITHOUT)
    if unknown:
        raise ValueError(f"unknown {sorted(unknown)}; known {', '.join(WITHOUT)}")
    path = os.pathsep.join(filter(None, [str(SHIM), env.get("PYTHONPATH")]))
    return {**env, "BENCH_ABLATE": names, "PYTHONPATH": path}


def check_without(log_path: Path, names: str) -> None:
    """Fails unless the server logging to ``log_path`` runs without ``names``."""
    if names and f"ablation shim: without {names}" not in log_path.read_text(errors="replace"):
        raise RuntimeError(f"the shim did not take out {names} (see {log_path})")


def without_option(parser: Any, what: str) -> None:
    """``--without NAME`` (repeatable; several joined by commas): one more server each."""

    def checked(value: str) -> str:
        try:
            without_env({}, value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value

    parser.add_argument("--without", action="append", default=[], type=checked, metavar="NAME",
                        help=f"{what} (repeatable; {', '.join(WITHOUT)})")  # fmt: skip


def bare_server(
    name: str, workdir: Path, target_dir: Path | None = None, s3: dict[str, str] | None = None
) -> Server:
    """bench/bare.py under waitress with the app's settings; with ``s3`` (the app's S3 settings,
    ``s3_settings(...)``) also the bare S3 forwarder of issue 12."""
    port = free_port()
    target_dir = target_dir or workdir / f"{name}-target"
    target_dir.mkdir(parents=True, exist_ok=True)
    command = [PYTHON, "-m", "bench.bare", "--port", str(port), "--dir", str(target_dir)]
    env = clean_env(TMPDIR=str(workdir / f"{name}-tmp"), **(s3 or {}))
    Path(env["TMPDIR"]).mkdir(parents=True, exist_ok=True)
    command += ["--s3"] if s3 else []
    return Server(name, command, env, workdir / f"{name}.log", port).start()


def request(
    port: int, method: str, path: str, body: bytes | None = None, headers: dict | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


JSON = {"Content-Type": "application/json"}


class Client:
    """Requests over one keep-alive connection, each with a request id for the access log."""

    def __init__(self, server: Server, tokens: dict[str, str] | None = None) -> None:
        self.server = server
        self.tokens = tokens or {}
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)

    def get(self, url: str, who: str | None = None, **headers: str) -> tuple[str, int, Any, bytes]:
        """(request id, status, headers, body); fails on an error status."""
        request_id = f"bench-{uuid.uuid4().hex}"
        headers["X-Request-ID"] = request_id
        if who:
            headers["Authorization"] = f"Bearer {self.tokens[who]}"
        self.conn.request("GET", url, headers=headers)
        response = self.conn.getresponse()
        body = response.read()
        if response.status >= 400:
            raise RuntimeError(f"GET {url} answered {response.status}: {body[:300]!r}")
        return request_id, response.status, response.headers, body

    def close(self) -> None:
        self.conn.close()

    def rounds(self, urls: dict[str, tuple[str, str | None]], requests: int, warmup: int) -> dict:
        """Round-robin over ``urls`` (name: (url, who)), rotating the order, ``warmup``
        unrecorded rounds first: per name the server times, their median and p95, and the
        ``total`` of the last answer (-1 without one)."""
        ids: dict[str, list[str]] = {name: [] for name in urls}
        totals: dict[str, int] = {}
        names = list(urls)
        for round_ in range(warmup + requests):
            shift = round_ % len(names)
            for name in names[shift:] + names[:shift]:
                request_id, _, _, body = self.get(*urls[name])
                found = re.search(rb'"total":(\d+)', body)
                totals[name] = int(found[1]) if found else -1
                if round_ >= warmup:
                    ids[name].append(request_id)
        times = self.server.server_times(rid for rids in ids.values() for rid in rids)
        results = {}
        for name, rids in ids.items():
            server_ms = [times[rid] for rid in rids if rid in times]
            results[name] = {"server_ms": server_ms, "median_ms": median(server_ms)}
            results[name] |= {"p95_ms": p95(server_ms), "total": totals[name]}
        return results


def login(port: int, email: str, password: str) -> str:
    """A bearer token through the API (POST /api/tokens)."""
    body = json.dumps({"email": email, "password": password, "token_name": "bench"}).encode()
    status, _, data = request(port, "POST", "/api/tokens", body, JSON)
    if status != 201:
        raise RuntimeError(f"login failed: {status} {data[:300]!r}")
    return json.loads(data)["token"]


def make_user(env: dict[str, str], email: str, password: str, admin: bool = False) -> None:
    command = ["provision-admin"] if admin else ["create-user", "--name", "Bench"]
    flask_cli(*command, "--email", email, "--password", password, env=env)


def multipart(name: str, data: bytes, field: str = "files[]") -> tuple[bytes, dict[str, str]]:
    """A form with one text file: (body, headers)."""
    head = f'--b\r\nContent-Disposition: form-data; name="{field}"; filename="{name}"\r\n'
    body = f"{head}Content-Type: text/plain\r\n\r\n".encode() + data + b"\r\n--b--\r\n"
    return body, {"Content-Type": "multipart/form-data; boundary=b"}


def fresh_text(size: int) -> bytes:
    """Text of `size` bytes that no other call returns (a version needs new bytes)."""
    line = os.urandom(24).hex().encode() + b"\n"
    return (line * (size // len(line) + 1))[:size]


def writers(server: Server, env: dict[str, str], clients: int) -> list[tuple[str, str]]:
    """One account per client, each with one released record made through the API: (token,
    id)."""
    sessions = []
    for n in range(clients):
        make_user(env, f"writer{n}@example.org", "bench-password")
        token = login(server.port, f"writer{n}@example.org", "bench-password")
        body, headers = multipart("v.txt", fresh_text(1024))
        headers["Authorization"] = f"Bearer {token}"
        status, _, data = request(server.port, "POST", "/api/files", body, headers)
        if status != 201:
            raise RuntimeError(f"upload failed: {status} {data[:200]!r}")
        sessions.append((token, json.loads(data)["files"][0]["id"]))
    return sessions


def curl(args: list[str], timeout: float = 900) -> list[dict[str, Any]]:
    """Run curl; one ``%{json}`` record per transfer (time_total, size_*, http_code...)."""
    command = ["curl", "-sS", "-H", "Expect:", "-w", "%{json}\n", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    records = [json.loads(line) for line in done.stdout.splitlines() if line.startswith('{"')]
    if done.returncode != 0 or not records:
        raise RuntimeError(f"curl failed ({done.returncode}): {done.stderr.strip()[:500]}")
    return records


# --- S3 ---------------------------------------------------------------------------------


def start_s3(workdir: Path) -> Any:
    """SeaweedFS (``weed mini``) on free loopback ports, as the test suite starts it."""
    from tests.support.seaweedfs import start_seaweedfs

    return start_seaweedfs(workdir / "seaweedfs")


def s3_client(server: Any) -> Any:
    retries = {"mode": "standard", "max_attempts": 3}
    return server.client(retries=retries, connect_timeout=5, read_timeout=300)


def s3_settings(server: Any, bucket: str) -> dict[str, str]:
    """The app's settings for ``bucket`` on the SeaweedFS ``server``."""
    settings = {"STORAGE_BACKEND": "s3", "S3_BUCKET": bucket, "S3_REGION": server.region}
    settings |= {"S3_ENDPOINT_URL": server.endpoint_url, "AWS_ACCESS_KEY_ID": server.access_key}
    return settings | {"AWS_SECRET_ACCESS_KEY": server.secret_key}


# --- memory and temporary disk of a process --------------------------------------------


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process, in bytes, from /proc/<pid>/status."""
    with open(f"/proc/{pid}/status") as status:
        fields = [line.partition(":") for line in status]
    return {k: int(v.split()[0]) * 1024 for k, _, v in fields if k in ("VmRSS", "VmHWM")}


def reset_peak_rss(pid: int) -> bool:
    """Reset VmHWM to the current RSS (``echo 5 > /proc/<pid>/clear_refs``, Linux 4.0+)."""
    with contextlib.suppress(OSError), open(f"/proc/{pid}/clear_refs", "w") as file:
        file.write("5")
        return True
    return False


def open_file_usage(pid: int, categories: dict[str, Path]) -> dict[str, int]:
    """Bytes in regular files the process holds open, by the folder they live in (else
    ``other``): /proc/<pid>/fd still sees waitress's unlinked spool files."""
    usage = dict.fromkeys([*categories, "other"], 0)
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return usage
    for fd in fds:
        link = f"{fd_dir}/{fd}"
        try:
            target = os.readlink(link)
            if not target.startswith("/"):
                continue
            info = os.stat(link)
        except OSError:
            continue
        if not (info.st_mode & 0o170000) == 0o100000:  # regular files only
            continue
        if target.endswith(" (deleted)"):
            target = target[: -len(" (deleted)")]
        inside = [n for n, folder in categories.items() if target.startswith(f"{folder}{os.sep}")]
        usage[(inside or ["other"])[0]] += info.st_size
    return usage


class Sampler:
    """Samples a process's RSS (and optionally its open temporary files) in a thread: the peak
    RSS, and per folder of ``file_categories`` the most bytes open in it at once."""

    def __init__(self, pid: int, interval: float = 0.02, file_categories: dict | None = None):
        self.pid, self.interval, self.file_categories = pid, interval, file_categories
        self.peak_rss, self.peaks = 0, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak_rss = max(self.peak_rss, proc_status(self.pid)["VmRSS"])
            except (OSError, KeyError):
                return
            usage = open_file_usage(self.pid, self.file_categories) if self.file_categories else {}
            for name, size in usage.items():
                self.peaks[name] = max(self.peaks.get(name, 0), size)
            self._stop.wait(self.interval)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def peak_files(self) -> dict[str, int]:
        return dict(self.peaks)


# --- statistics and reporting -----------------------------------------------------------


def median(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]


def p95(values: Sequence[float]) -> float:
    return percentile(values, 95)


def mib_per_s(nbytes: float, seconds: float) -> float:
    return nbytes / MiB / seconds if seconds > 0 else float("nan")


def concurrent_rate(
    port: int, clients: int, requests: int, send: Callable[[Any, int, int], int]
) -> float:
    """Requests per second of ``clients`` threads started at once, each on its own keep-alive
    connection making ``requests`` calls of ``send(connection, client, i)`` (which returns the
    answer's status); fails on any error status."""
    errors: list[int] = []
    barrier = threading.Barrier(clients + 1)

    def client(n: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        barrier.wait()
        errors.extend(status for i in range(requests) if (status := send(conn, n, i)) >= 400)
        conn.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    barrier.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed: {errors[:5]}")
    return clients * requests / elapsed


def alternate(
    repetitions: int, variants: Sequence[tuple[str, Callable[[int], Any]]], warmup: int = 0
) -> dict[str, list[Any]]:
    """Run every variant once per repetition, rotating the order (A B, B A, A B, ...), after
    ``warmup`` unrecorded runs of each (connection pools, page cache, lazily built code)."""
    for _ in range(warmup):
        for _name, run in variants:
            run(-1)
    results: dict[str, list[Any]] = {name: [] for name, _ in variants}
    for rep in range(repetitions):
        shift = rep % len(variants)
        for name, run in [*variants[shift:], *variants[:shift]]:
            results[name].append(run(rep))
    return results


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[f"{v:.3f}" if isinstance(v, float) and abs(v) < 10 else f"{v:.1f}"
              if isinstance(v, float) else str(v) for v in row] for row in rows]  # fmt: skip
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    sys.stdout.flush()


@dataclass
class Report:
    """The results of one benchmark run: parameters, measurements, target checks."""

    name: str
    params: dict[str, Any]
    data: dict[str, Any] = field(default_factory=dict)
    checks: list[dict[str, Any]] = field(default_factory=list)
    started: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    def check(
        self, target: str, value: float, limit: float, higher_is_better: bool, unit: str = ""
    ) -> bool:
        ok = value >= limit if higher_is_better else value <= limit
        op = ">=" if higher_is_better else "<="
        verdict = "PASS" if ok else "FAIL"
        print(f"{verdict}  {target}: {value:.3f}{unit} (target {op} {limit}{unit})", flush=True)
        check = {"target": target, "value": value, "limit": limit, "op": op, "unit": unit}
        self.checks.append({**check, "pass": ok})
        return ok

    def save(self, latest: bool = True) -> Path:
        """Write the JSON; ``latest`` also as ``<name>-latest.json`` (partial runs leave it
        alone); print the verdicts again, for BENCHMARKS.md."""
        RESULTS.mkdir(parents=True, exist_ok=True)
        document = {"name": self.name, "started": self.started,
                    "finished": datetime.now(UTC).isoformat(timespec="seconds"),
                    "command": " ".join([_python(), "-m", f"bench.{self.name}", *sys.argv[1:]]),
                    "machine": machine(), "params": self.params, "data": self.data,
                    "checks": self.checks}  # fmt: skip
        path = RESULTS / f"{self.name}-{stamp()}.json"
        text = json.dumps(document, indent=2, default=str)
        path.write_text(text)
        if latest:
            (RESULTS / f"{self.name}-latest.json").write_text(text)
        log(f"results: {path.relative_to(ROOT)} ({document['machine']['git']})")
        print("verdicts:" if self.checks else "no verdicts")
        for c in self.checks:
            verdict = "PASS" if c["pass"] else "FAIL"
            print(f"{verdict}  {c['target']}: {c['value']:.3f}{c['unit']} ({c['op']} {c['limit']})")
        return path


def _python() -> str:
    """The interpreter as a command to type in the repository root."""
    path = Path(PYTHON)
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def machine() -> dict[str, Any]:
    """What the numbers were measured on (BENCHMARKS.md's "Machine" is kept by hand)."""
    git = ["git", "-C", str(ROOT)]
    revision = subprocess.run(
        [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    dirty = subprocess.run([*git, "status", "--porcelain", "--", "app", "migrations", "wsgi.py"],
                           capture_output=True, text=True)  # fmt: skip
    return {
        "nproc": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "load_average_at_start": os.getloadavg(),
        "git": revision.stdout.strip() + (" (app changed)" if dirty.stdout.strip() else ""),
    }
