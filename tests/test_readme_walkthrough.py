"""The README's quick start and its curl walkthrough run as written.

The quick start's block runs verbatim under `bash -euo pipefail` in an empty folder, from its
`git clone` on, with three documented substitutions, none of which touches what the block
does: `<address of this repository>` is a repository holding the working tree as it is (its
tracked and not ignored files, committed), the server's address `127.0.0.1:8000` is a free
port (`PORT` tells `make run` the same), and `VENV` (a variable of the Makefile) names a
folder whose `flask` runs this interpreter, so that `make run` installs nothing. The `make
run` it starts in the background serves SQLite and local storage in the clone, and creates
the administrator the block exports. The walkthrough's block then runs verbatim under the
same shell options in a folder of its own, against that server, with that administrator."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import zipfile
from pathlib import Path

import pytest

from tests.conftest import create_account
from tests.support import samples, server
from tests.support.datacite import FakeDataCite
from tests.support.readme import stop_group, venv_without_install
from tests.support.server import ROOT, clean_env, free_port

README = ROOT / "README.md"
QUICK_START = "## Quick start"
HEADING = "## API walkthrough with curl"
APPROVAL = "## Release approval: four eyes"
DOIS = "## DOIs through DataCite"
ADDRESS = "<address of this repository>"
#: What the quick start exports, and the walkthrough logs in with.
ADMIN = "export ADMIN_EMAIL=admin@example.org ADMIN_PASSWORD='a long passphrase'"
AUTHORS = "Müller, Anna; Schmidt, Ben"


def sh_block(heading: str, text: str | None = None) -> str:
    """The first `sh` block after `heading`."""
    text = README.read_text() if text is None else text
    section = text[text.index(heading) :]
    match = re.search(r"^```sh\n(.*?)^```$", section, re.S | re.M)
    assert match, f"no sh block under {heading!r}"
    return match.group(1)


def walkthrough() -> str:
    """The first `sh` block after the walkthrough's heading."""
    return sh_block(HEADING)


def quick_start() -> str:
    return sh_block(QUICK_START)


def approval_walkthrough() -> str:
    return sh_block(APPROVAL)


def doi_walkthrough() -> str:
    return sh_block(DOIS)


def test_the_readme_starts_with_the_quick_start():
    text = README.read_text()
    headings = re.findall(
        r"^#{1,2} .*$", re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M), re.M
    )
    assert headings[:2] == ["# File repository", QUICK_START]
    description = text[len("# File repository") : text.index(QUICK_START)].strip()
    assert "\n\n" not in description  # one paragraph
    assert 1 <= len(re.findall(r"[.!?](?:\s|$)", description)) <= 3


def test_the_quick_start_is_short_and_ends_on_a_public_page():
    lines = quick_start().splitlines()
    assert len(lines) <= 15
    assert lines[0] == f"git clone {ADDRESS} file-repository && cd file-repository"
    assert "export KEEP_RELEASED_VERSIONS=on" in quick_start()
    assert ADMIN in lines
    assert any(line.startswith("make run &") for line in lines)
    assert "-F freigabe=true" in quick_start()
    assert "$BASE/records/$ID" in lines[-1]


def test_no_text_value_goes_with_dash_f():
    """curl cuts an `-F` value at its first `;`: only files and values that cannot hold one
    (path, dates, booleans) may use it; every text value goes with --form-string."""
    for block in (quick_start(), walkthrough()):
        for name, _value in re.findall(r"-F '?([\w\[\]]+)=(\S+)", block):
            assert name in {"files[]", "file", "path", "sperrfrist", "freigabe"}, name
    assert f"--form-string autoren='{AUTHORS}'" in walkthrough()


def test_no_other_block_calls_the_api():
    """Every curl example of the service is in the blocks the test below runs."""
    text = README.read_text()
    blocks = re.findall(r"^```sh\n(.*?)^```$", text, re.S | re.M)
    calling = [block for block in blocks if "$BASE" in block or "/api/" in block]
    assert calling == [quick_start(), walkthrough(), approval_walkthrough(), doi_walkthrough()]


def snapshot_repository(target: Path) -> Path:
    """A git repository with the working tree as it is: what a clone of this one would hold,
    uncommitted changes included."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    target.mkdir()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if "node_modules" in Path(name).parts or source.is_symlink() or not source.is_file():
            continue
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        (target / name).write_bytes(source.read_bytes())
        (target / name).chmod(source.stat().st_mode & 0o777)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.org"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run([*git, *command], cwd=target, check=True, capture_output=True)
    return target


def test_the_quick_start_then_the_walkthrough_run_top_to_bottom(tmp_path: Path):
    origin = snapshot_repository(tmp_path / "origin")
    venv = venv_without_install(tmp_path / "venv")
    port = free_port()
    start = (
        quick_start().replace(ADDRESS, str(origin)).replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    )
    env = clean_env(VENV=str(venv), PORT=str(port))
    for name in (
        "PUBLIC_BASE_URL",
        "TRUSTED_HOSTS",
        "PROXY_COUNT",
        "HOST",
        "PYTHONPATH",
        "MAKEFLAGS",
    ):
        env.pop(name, None)

    workdir = tmp_path / "quick-start"
    workdir.mkdir()
    log_path = tmp_path / "quick-start.log"
    with open(log_path, "w") as log:
        shell = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", start],
            cwd=workdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the block's `make run &` and its server stay in this group
        )
    try:
        try:
            shell.wait(timeout=180)
        finally:
            quick_log = log_path.read_text()
        assert shell.returncode == 0, quick_log[-4000:]
        page = re.search(
            rf"^Its public page: http://127\.0\.0\.1:{port}/records/(\S+)$", quick_log, re.M
        )
        assert page, quick_log[-4000:]
        assert "<h1>Arbeitslosenquote; 2025 und 2026</h1>" in quick_log
        clone = workdir / "file-repository"
        assert (clone / "quote.csv").exists()
        assert (clone / "instance" / "files.sqlite3").exists()  # make run's defaults, in the clone

        result, folder, report, report_v2 = run_walkthrough(tmp_path, env, port)
    finally:
        stop_group(shell)
    assert result.returncode == 0, (
        f"exit {result.returncode}\n--- stdout\n{result.stdout[-4000:]}\n"
        f"--- stderr\n{result.stderr[-4000:]}\n--- server\n{log_path.read_text()[-2000:]}"
    )
    assert result.stderr == ""

    made = {path.name for path in folder.iterdir()} - {
        "bericht.pdf",
        "bericht-v2.pdf",
        "daten.csv",
        "folge-1.mp3",
    }
    assert made == {
        "upload.json",
        "downloaded",
        "first-kib",
        "public-bericht.pdf",
        "bericht-v1.pdf",
        "shared-bericht.pdf",
        "reports-2026-public.zip",
        "reports-2026-mine.zip",
    }
    uploaded = json.loads((folder / "upload.json").read_text())["files"]
    assert [record["autoren"] for record in uploaded] == [AUTHORS, AUTHORS]
    assert uploaded[0]["sachschlagwoerter"] == "Arbeitsmarkt; Statistik"
    assert uploaded[0]["beschreibung"] == "Der Arbeitsmarkt in Zahlen; Quoten nach Ländern"
    assert (folder / "downloaded" / "bericht.pdf").read_bytes() == report
    assert (folder / "first-kib").read_bytes() == report[:1024]
    assert (folder / "public-bericht.pdf").read_bytes() == report_v2
    assert (folder / "bericht-v1.pdf").read_bytes() == report  # a kept version (issue 39)
    assert '"Tabelle 3 korrigiert"' in result.stdout  # the listed versions
    assert (folder / "shared-bericht.pdf").read_bytes() == report_v2
    for name in ("reports-2026-public.zip", "reports-2026-mine.zip"):
        with zipfile.ZipFile(folder / name) as archive:
            assert "manifest.json" in archive.namelist()
    assert "<dc:title>Jahresbericht 2026" in result.stdout
    assert '<enclosure url="http://127.0.0.1:' in result.stdout


def run_walkthrough(
    tmp_path: Path, env: dict[str, str], port: int
) -> tuple[subprocess.CompletedProcess, Path, bytes, bytes]:
    folder = tmp_path / "walkthrough"
    folder.mkdir()
    report, report_v2 = samples.pdf_bytes(), samples.pdf_bytes() + b"\n% v2\n"
    (folder / "bericht.pdf").write_bytes(report)
    (folder / "bericht-v2.pdf").write_bytes(report_v2)
    (folder / "daten.csv").write_text("jahr;quote\n2025;5,9\n2026;6,1\n")
    (folder / "folge-1.mp3").write_bytes(samples.fixture("tone.mp3"))
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", walkthrough()],
        cwd=folder,
        env={**env, "BASE": f"http://127.0.0.1:{port}"},
        capture_output=True,
        text=True,
        timeout=90,
    )
    return result, folder, report, report_v2


def test_env_files_with_secrets_stay_out_of_git():
    """docker compose reads every secret from `.env`, and the README suggests keeping the
    settings there: git must not pick it up."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for name in (".env", "docs/.env"):
        ignored = subprocess.run(["git", "check-ignore", "-q", name], cwd=ROOT)
        assert ignored.returncode == 0, f"{name} is not ignored by git"
    assert "`.env`" in README.read_text()
    assert "(.gitignore keeps it" in (ROOT / "docker-compose.yml").read_text()


def test_the_release_approval_block_runs_with_a_second_account_approving(
    tmp_path: Path, sqlite_template: Path
):
    """The block of "Release approval: four eyes" against `flask serve` with
    RELEASE_APPROVAL=on, with the two accounts the text names, the approver made one by
    `flask users grant-approver` as an operator would."""
    shutil.copyfile(sqlite_template, tmp_path / "db.sqlite3")
    url = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    env = clean_env(
        DATABASE_URL=url, STORAGE_LOCAL_ROOT=str(tmp_path / "storage"), RELEASE_APPROVAL="on"
    )
    create_account(url, tmp_path / "unused", "autorin@example.org", "first long passphrase")
    create_account(url, tmp_path / "unused", "pruefer@example.org", "second long passphrase")
    granted = server.flask("users", "grant-approver", "pruefer@example.org", env=env)
    assert granted.returncode == 0, granted.stderr
    folder = tmp_path / "approval"
    folder.mkdir()
    (folder / "bericht.pdf").write_bytes(samples.pdf_bytes())
    with server.running_server(env, tmp_path / "server.log") as port:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", approval_walkthrough()],
            cwd=folder,
            env={**env, "BASE": f"http://127.0.0.1:{port}"},
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    assert result.stderr == ""
    assert result.stdout.splitlines() == [
        "Jahresbericht",
        "approved",
        "1",
        "approved",
        "2",
        "declined",
    ]


def test_the_doi_block_runs_against_a_fake_datacite(
    tmp_path: Path, sqlite_template: Path, datacite_server: FakeDataCite
):
    """The block of "DOIs through DataCite" against `flask serve` with the four DATACITE_*
    settings naming the fake DataCite (tests/support/datacite.py); the server's outbox thread
    creates the draft and deletes it again, and nothing stays owed."""
    shutil.copyfile(sqlite_template, tmp_path / "db.sqlite3")
    url = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    env = clean_env(
        DATABASE_URL=url,
        STORAGE_LOCAL_ROOT=str(tmp_path / "storage"),
        PUBLIC_BASE_URL="https://files.example.org",
        DATACITE_URL=datacite_server.url,
        DATACITE_REPOSITORY=datacite_server.repository,
        DATACITE_PASSWORD=datacite_server.password,
        DATACITE_PREFIX=datacite_server.prefix,
    )
    create_account(url, tmp_path / "unused", "autorin@example.org", "first long passphrase")
    folder = tmp_path / "dois"
    folder.mkdir()
    (folder / "bericht.pdf").write_bytes(samples.pdf_bytes())
    with server.running_server(env, tmp_path / "server.log") as port:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", doi_walkthrough()],
            cwd=folder,
            env={**env, "BASE": f"http://127.0.0.1:{port}"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        # The released reservation leaves nothing owed once the server's outbox thread ran.
        deadline = time.monotonic() + 60
        while True:
            status = server.flask("doi", "status", env=env)
            done = status.stdout.endswith("0 DOI(s) pending, 0 failing.\n")
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    assert result.stderr == ""
    assert result.stdout.splitlines() == ["draft", "None"]
    assert status.returncode == 0 and status.stdout.splitlines() == [
        "0 DOI(s) pending, 0 failing."
    ], status.stdout + status.stderr
    assert datacite_server.dois == {}
    assert [r.status for r in datacite_server.requests if r.status >= 300] == []
