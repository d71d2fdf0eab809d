"""The image's layout without a Docker engine: the wheel built from what the Dockerfile's build
stage copies, installed (not editable) into a fresh environment, started with the image's own
CMD and HEALTHCHECK from a working folder holding only wsgi.py and the migrations.

The image runs with a read-only root filesystem where only the instance folder and TMPDIR are
writable; here every file of the layout is fingerprinted before and after a session of
migrations, provisioning, uploads and downloads, and only those two folders may change.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.support.api import encode_multipart
from tests.support.server import clean_env, free_port, wait_for_port
from tests.test_deployment_files import DOCKERFILE, ROOT, stages

VENV_IN_IMAGE = "/opt/file-repository"
INSTANCE_IN_IMAGE = f"{VENV_IN_IMAGE}/var/app-instance"


def instruction(stage: list[str], name: str) -> str:
    return next(line for line in stage if line.startswith(name + " "))


def copied_sources(stage: list[str]) -> list[str]:
    """What `COPY <src> ./...` lines of a stage take from the build context."""
    return [
        line.split()[1]
        for line in stage
        if line.startswith("COPY ") and not line.startswith("COPY --from")
    ]


def fingerprint(root: Path, skip: tuple[Path, ...]) -> dict[str, tuple[int, int, int]]:
    found = {}
    for path in sorted(root.rglob("*")):
        if any(path == s or s in path.parents for s in skip):
            continue
        info = path.lstat()
        found[str(path.relative_to(root))] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return found


def request(port: int, method: str, path: str, body: bytes = b"", headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request(method, path, body=body or None, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """/opt/file-repository with the wheel, /srv/app and the two writable folders, as the
    Dockerfile builds them, under one temporary root."""
    root = tmp_path_factory.mktemp("image")
    found = stages(DOCKERFILE)
    source = root / "src"
    source.mkdir()
    for name in copied_sources(found["build"]):
        origin = ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, source / name)
    wheels = root / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(wheels)]
        + [str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("file_repository-*.whl")

    venv = root / VENV_IN_IMAGE.lstrip("/")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
        + [str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    # The dependencies come from the test environment (a plain path entry, so its editable
    # install of this checkout is not activated); the app itself only from the wheel.
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "test-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    # pip would have made this entry point when installing Flask into the environment.
    flask = venv / "bin" / "flask"
    flask.write_text(f"#!{python}\nimport sys\nfrom flask.cli import main\nsys.exit(main())\n")
    flask.chmod(0o755)

    workdir = root / instruction(found["runtime"], "WORKDIR").split()[1].lstrip("/")
    workdir.mkdir(parents=True)
    for name in copied_sources(found["runtime"]):
        origin = ROOT / name
        if origin.is_dir():
            shutil.copytree(origin, workdir / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, workdir / name)
    for folder in re.findall(r"\s(/\S+)", instruction(found["runtime"], "RUN install -d")):
        (root / folder.lstrip("/")).mkdir(parents=True, exist_ok=True)
    return root


def image_env(root: Path, port: int) -> dict[str, str]:
    """The runtime stage's ENV, with its absolute paths moved under `root`."""
    env_line = instruction(stages(DOCKERFILE)["runtime"], "ENV")
    settings = dict(re.findall(r"(\w+)=(\S+)", env_line))
    path = settings.pop("PATH").replace("$PATH", os.environ["PATH"])
    env = clean_env(
        PATH=path.replace(VENV_IN_IMAGE, str(root / VENV_IN_IMAGE.lstrip("/"))),
        TMPDIR=str(root / settings.pop("TMPDIR").lstrip("/")),
        PORT=str(port),
        HOST="127.0.0.1",
        ADMIN_EMAIL="admin@example.org",
        ADMIN_PASSWORD="a long passphrase",
        **{name: value for name, value in settings.items() if name not in ("HOST", "PORT")},
    )
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    return env


def test_the_wheel_serves_with_the_image_cmd_and_writes_only_its_volumes(layout: Path):
    runtime = stages(DOCKERFILE)["runtime"]
    workdir = layout / instruction(runtime, "WORKDIR").split()[1].lstrip("/")
    instance = layout / INSTANCE_IN_IMAGE.lstrip("/")
    port = free_port()
    env = image_env(layout, port)
    spool = Path(env["TMPDIR"])
    writable = (instance, spool)
    assert json.loads(instruction(runtime, "VOLUME")[len("VOLUME ") :]) == [
        "/" + str(folder.relative_to(layout)) for folder in writable
    ]
    before = fingerprint(layout, skip=writable)

    python = shutil.which("python", path=env["PATH"])
    where = subprocess.run(
        [python, "-c", "import app, flask; print(app.__file__)"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(layout / VENV_IN_IMAGE.lstrip("/")), where

    cmd = json.loads(instruction(runtime, "CMD")[len("CMD ") :])
    log = layout / "serve.log"
    with open(log, "w") as output:
        process = subprocess.Popen(
            cmd, cwd=workdir, env=env, stdout=output, stderr=subprocess.STDOUT
        )
    try:
        wait_for_port(port, process, log, "the image's CMD", timeout=60)
        health = instruction(runtime, "HEALTHCHECK")
        probe = json.loads(health[health.index(" CMD ") + len(" CMD ") :])
        probe = [part.replace(":8000/", f":{port}/") for part in probe]
        healthy = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=30)
        assert healthy.returncode == 0, healthy.stderr

        status, body = request(
            port,
            "POST",
            "/api/tokens",
            json.dumps(
                {"email": "admin@example.org", "password": "a long passphrase", "token_name": "t"}
            ).encode(),
            {"Content-Type": "application/json"},
        )
        assert status == 201, body
        auth = {"Authorization": f"Bearer {json.loads(body)['token']}"}
        content = b"stored in the instance volume\n" * 100_000
        content_type, upload = encode_multipart([("files[]", "notes.txt", content, "text/plain")])
        status, body = request(
            port, "POST", "/api/files", upload, {**auth, "Content-Type": content_type}
        )
        assert status == 201, body
        record_id = json.loads(body)["files"][0]["id"]
        status, body = request(port, "GET", f"/api/files/{record_id}/download", headers=auth)
        assert status == 200 and body == content
        # The landing pages' templates and style sheet are in the wheel.
        status, body = request(port, "GET", f"/records/{record_id}")
        assert status == 200 and b"<h1>notes.txt</h1>" in body, body[:300]
        assert b'class="citation"' in body, "the Cite box (its CSL style) is in the wheel"
        # The English catalogue is in the wheel too (compiled when the service starts).
        status, body = request(port, "GET", f"/records/{record_id}?lang=en")
        assert status == 200 and b"<dt>File name</dt>" in body, body[:300]
        status, body = request(port, "GET", "/static/pages/pages.css")
        assert status == 200 and b"font-family" in body
        # So are the documentation page's template and script.
        status, body = request(port, "GET", "/api/docs")
        assert status == 200 and b"data-spec-url" in body, body[:300]
        status, body = request(port, "GET", "/api/docs/assets/docs.js")
        assert status == 200 and b"SwaggerUIBundle" in body
    finally:
        process.terminate()
        process.wait(timeout=15)

    assert fingerprint(layout, skip=(*writable, log)) == before
    assert (instance / "files.sqlite3").exists()
    assert any((instance / "storage").rglob("*")), "the upload went to the instance volume"
