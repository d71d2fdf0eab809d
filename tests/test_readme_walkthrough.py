"""The README's curl walkthrough runs as written: its block, verbatim, under
`bash -euo pipefail` in an empty folder, against `flask serve` (as `make run` starts it) on a
fresh database with the administrator the README provisions."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support import samples
from tests.support.server import ROOT, clean_env, flask, free_port, wait_for_port

README = ROOT / "README.md"
HEADING = "## API walkthrough with curl"


def walkthrough() -> str:
    """The first `sh` block after the walkthrough's heading."""
    text = README.read_text()
    section = text[text.index(HEADING) :]
    match = re.search(r"^```sh\n(.*?)^```$", section, re.S | re.M)
    assert match, "no sh block under the walkthrough heading"
    return match.group(1)


def test_no_other_block_calls_the_api():
    """Every curl example of the service is in the block the test below runs."""
    text = README.read_text()
    blocks = re.findall(r"^```sh\n(.*?)^```$", text, re.S | re.M)
    calling = [block for block in blocks if "$BASE" in block]
    assert calling == [walkthrough()]


def test_the_walkthrough_runs_top_to_bottom(tmp_path: Path):
    readme = README.read_text()
    assert "ADMIN_EMAIL=admin@example.org ADMIN_PASSWORD='a long passphrase' make run" in readme
    env = clean_env(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        STORAGE_LOCAL_ROOT=str(tmp_path / "storage"),
        ADMIN_EMAIL="admin@example.org",
        ADMIN_PASSWORD="a long passphrase",
    )
    for name in ("PUBLIC_BASE_URL", "TRUSTED_HOSTS", "PROXY_COUNT", "HOST"):
        env.pop(name, None)
    for step in (("db", "upgrade"), ("provision-admin",)):
        result = flask(*step, env=env)
        assert result.returncode == 0, result.stderr

    folder = tmp_path / "walkthrough"
    folder.mkdir()
    report, report_v2 = samples.pdf_bytes(), samples.pdf_bytes() + b"\n% v2\n"
    (folder / "bericht.pdf").write_bytes(report)
    (folder / "bericht-v2.pdf").write_bytes(report_v2)
    (folder / "daten.csv").write_text("jahr;quote\n2025;5,9\n2026;6,1\n")
    (folder / "folge-1.mp3").write_bytes(samples.fixture("tone.mp3"))
    inputs = {path.name for path in folder.iterdir()}

    port = free_port()
    log_path = tmp_path / "server.log"
    command = [sys.executable, "-m", "flask", "--app", "wsgi", "serve"]
    with open(log_path, "w") as log:
        server = subprocess.Popen(
            command, cwd=ROOT, env={**env, "PORT": str(port)}, stdout=log, stderr=log
        )
        try:
            wait_for_port(port, server, log_path, "flask serve")
            shell_env = {**env, "BASE": f"http://127.0.0.1:{port}"}
            result = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", walkthrough()],
                cwd=folder,
                env=shell_env,
                capture_output=True,
                text=True,
                timeout=60,
            )
        finally:
            server.terminate()
            server.wait(timeout=15)
    assert result.returncode == 0, (
        f"exit {result.returncode}\n--- stdout\n{result.stdout[-4000:]}\n"
        f"--- stderr\n{result.stderr[-4000:]}\n--- server\n{log_path.read_text()[-2000:]}"
    )
    assert result.stderr == ""

    made = {path.name for path in folder.iterdir()} - inputs
    assert made == {
        "upload.json",
        "downloaded",
        "first-kib",
        "public-bericht.pdf",
        "shared-bericht.pdf",
        "reports-2026-public.zip",
        "reports-2026-mine.zip",
    }
    assert (folder / "downloaded" / "bericht.pdf").read_bytes() == report
    assert (folder / "first-kib").read_bytes() == report[:1024]
    assert (folder / "public-bericht.pdf").read_bytes() == report_v2
    assert (folder / "shared-bericht.pdf").read_bytes() == report_v2
    for name in ("reports-2026-public.zip", "reports-2026-mine.zip"):
        with zipfile.ZipFile(folder / name) as archive:
            assert "manifest.json" in archive.namelist()
    assert "<dc:title>Jahresbericht 2026" in result.stdout
    assert '<enclosure url="http://127.0.0.1:' in result.stdout
