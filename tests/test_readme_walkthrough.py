"""The README's quick start and short walkthrough, and the curl blocks of docs/api.md,
docs/approval.md and docs/dois.md, run as written.

The quick start's block runs verbatim under `bash -euo pipefail` in an empty folder, from its
`git clone` on, with three documented substitutions, none of which touches what the block
does: `<address of this repository>` is a repository holding the working tree as it is (its
tracked and not ignored files, committed), `PORT=8000` is a free port, and `VENV` (a variable
of the Makefile) names a folder whose `flask` runs this interpreter, so that `make start`
installs nothing. The `make start` it runs serves SQLite and local storage in the clone, in
the background, and creates the administrator the block exports. The short walkthrough runs in
the same shell, as a reader types it after the quick start. The walkthrough of docs/api.md
then runs verbatim under the same shell options in the clone, against that server, with that
administrator and the quick start's `BASE` and `PORT`.

The blocks of docs/approval.md and docs/dois.md restart the server themselves (`make start`
with their settings); each runs verbatim in a clone of its own, with the quick start's `BASE`,
`PORT` and administrator, `.venv/` standing for the folder above, and the DOI block's DataCite
address standing for the fake DataCite of tests/support/datacite.py, which takes the block's
made-up values."""

from __future__ import annotations

import http.server
import json
import re
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from tests.support import samples
from tests.support.datacite import FakeDataCite
from tests.support.readme import stop_group, venv_without_install
from tests.support.server import ROOT, clean_env, free_port

README = ROOT / "README.md"
API = ROOT / "docs" / "api.md"
APPROVAL = ROOT / "docs" / "approval.md"
DOIS = ROOT / "docs" / "dois.md"
#: Every document whose shell blocks may call the service.
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
QUICK_START = "## Quick start"
SHORT = "## A short walkthrough"
HEADING = "## API walkthrough with curl"
TRYING = "## Trying it"
ADDRESS = "<address of this repository>"
PORT_LINE = "export PORT=8000;"
#: What the quick start exports, and the walkthrough logs in with.
ADMIN = "export ADMIN_EMAIL=admin@example.org ADMIN_PASSWORD='a long passphrase'"
ADMIN_ENV = {"ADMIN_EMAIL": "admin@example.org", "ADMIN_PASSWORD": "a long passphrase"}
AUTHORS = "Müller, Anna; Schmidt, Ben"
#: The DataCite address of the DOI block, and the made-up values it sends there.
DATACITE_URL = "https://api.test.datacite.org"
MADE_UP = {"repository": "EXAMPLE.FILES", "password": "made-up", "prefix": "10.5072"}
#: Settings of the test's own environment that the blocks must not inherit.
NOT_INHERITED = (
    "PUBLIC_BASE_URL",
    "TRUSTED_HOSTS",
    "PROXY_COUNT",
    "HOST",
    "PYTHONPATH",
    "RELEASE_APPROVAL",
    "KEEP_RELEASED_VERSIONS",
    "DATACITE_URL",
    "DATACITE_REPOSITORY",
    "DATACITE_PASSWORD",
    "DATACITE_PREFIX",
)


def sh_block(document: Path, heading: str) -> str:
    """The first `sh` block after `heading` in `document`."""
    text = document.read_text()
    section = text[text.index(f"\n{heading}\n") :]
    match = re.search(r"^```sh\n(.*?)^```$", section, re.S | re.M)
    assert match, f"no sh block under {heading!r} in {document.name}"
    return match.group(1)


def quick_start() -> str:
    return sh_block(README, QUICK_START)


def short_walkthrough() -> str:
    return sh_block(README, SHORT)


def walkthrough() -> str:
    """The first `sh` block after the walkthrough's heading in docs/api.md."""
    return sh_block(API, HEADING)


def approval_walkthrough() -> str:
    return sh_block(APPROVAL, TRYING)


def doi_walkthrough() -> str:
    return sh_block(DOIS, TRYING)


def all_blocks() -> list[str]:
    return [
        quick_start(),
        short_walkthrough(),
        walkthrough(),
        approval_walkthrough(),
        doi_walkthrough(),
    ]


def block_env(venv: Path, port: int, **settings: str) -> dict[str, str]:
    env = clean_env(VENV=str(venv), PORT=str(port), **settings)
    for name in NOT_INHERITED:
        if name not in settings:
            env.pop(name, None)
    return env


def test_the_readme_starts_with_the_quick_start():
    text = README.read_text()
    headings = re.findall(
        r"^#{1,2} .*$", re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M), re.M
    )
    assert headings[:3] == ["# File repository", QUICK_START, SHORT]
    description = text[len("# File repository") : text.index(QUICK_START)].strip()
    assert "\n\n" not in description  # one paragraph
    assert 1 <= len(re.findall(r"[.!?](?:\s|$)", description)) <= 3


def test_the_quick_start_is_short_and_ends_on_a_public_page():
    lines = quick_start().splitlines()
    assert len(lines) <= 15
    assert lines[0] == f"git clone {ADDRESS} file-repository && cd file-repository"
    assert "export KEEP_RELEASED_VERSIONS=on" in quick_start()
    assert ADMIN in lines
    assert any(line.startswith(PORT_LINE) for line in lines)
    # Our own server, or nothing more: every step after `make start` depends on the one before.
    start = next(i for i, line in enumerate(lines) if line.startswith("make start &&"))
    assert all(line.split("  # ")[0].rstrip().endswith(("&&", "\\")) for line in lines[start:-1])
    assert "-F freigabe=true" in quick_start()
    assert "$BASE/records/$ID" in lines[-1]


def test_on_a_busy_port_the_quick_start_stops_at_the_one_line_that_says_so(
    tmp_path: Path, origin: Path
):
    """Another program answers on PORT (here every request with `{}`): `make start` is not
    fooled by it, prints why its own server stopped, and nothing after it runs."""
    venv = venv_without_install(tmp_path / "venv")

    class Other(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{}")

        do_POST = do_GET  # noqa: N815

        def log_message(self, *args: object) -> None:
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Other)
    port = other.server_address[1]
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        start = quick_start().replace(ADDRESS, str(origin))
        start = start.replace(PORT_LINE, f"export PORT={port};")
        workdir = tmp_path / "busy"
        workdir.mkdir()
        shell, stdout, stderr = run_block(start, workdir, block_env(venv, port), workdir, 180)
    finally:
        other.shutdown()
        other.server_close()
    assert shell.returncode != 0
    *_, said, make_said = stderr.splitlines()
    assert said == (
        f"Error: port {port} on 127.0.0.1 is already in use: stop what listens there, or "
        "choose another with PORT or --port"
    )
    assert make_said.startswith("make: *** ") and make_said.endswith("start] Error 1")
    assert "Traceback" not in stdout + stderr and "Its public page" not in stdout


def test_no_text_value_goes_with_dash_f():
    """curl cuts an `-F` value at its first `;`: only files and values that cannot hold one
    (path, dates, booleans) may use it; every text value goes with --form-string."""
    for block in all_blocks():
        for name, _value in re.findall(r"-F '?([\w\[\]]+)=(\S+)", block):
            assert name in {"files[]", "file", "path", "sperrfrist", "freigabe"}, name
    assert f"--form-string autoren='{AUTHORS}'" in walkthrough()


def test_no_other_block_calls_the_api():
    """Every curl example of the service, in the README and the chapters, is in the blocks the
    tests below run."""
    calling = []
    for document in DOCUMENTS:
        blocks = re.findall(r"^```sh\n(.*?)^```$", document.read_text(), re.S | re.M)
        calling += [block for block in blocks if "$BASE" in block or "/api/" in block]
    assert sorted(calling) == sorted(all_blocks())


def test_downloads_keep_no_error_in_a_file():
    """A block's download writes its file only when the answer is not an error (curl --fail):
    the JSON error of --fail-with-body would otherwise sit in the file, unseen."""
    for block in all_blocks():
        for line in block.splitlines():
            command = line.strip()
            if not command.startswith(("curl ", "download ")) or "/dev/null" in command:
                continue
            if re.search(r"\s(-o|-O\w*|--output)\s", command.split(" | ")[0]):
                assert command.startswith(("download ", "curl -sf ")), line


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


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return snapshot_repository(tmp_path_factory.mktemp("origin") / "repository")


def clone(origin: Path, target: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(origin), str(target)], check=True)
    return target


def run_block(
    script: str, cwd: Path, env: dict[str, str], output: Path, timeout: float
) -> tuple[subprocess.Popen, str, str]:
    """`script` under `bash -euo pipefail` in a process group of its own (a server it starts
    stays in it, for `stop_group`); its exit, stdout and stderr."""
    out, err = output.with_suffix(".out"), output.with_suffix(".err")
    with open(out, "w") as stdout, open(err, "w") as stderr:
        shell = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=cwd,
            env=env,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        shell.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(shell)
        raise AssertionError(f"{output.name} ran out of time:\n{out.read_text()[-4000:]}") from None
    return shell, out.read_text(), err.read_text()


def server_log(checkout: Path) -> str:
    log = checkout / "instance" / "run.log"
    return log.read_text()[-3000:] if log.exists() else "(no instance/run.log)"


def test_the_quick_start_then_the_walkthrough_run_top_to_bottom(tmp_path: Path, origin: Path):
    venv = venv_without_install(tmp_path / "venv")
    port = free_port()
    start = quick_start().replace(ADDRESS, str(origin)).replace(PORT_LINE, f"export PORT={port};")
    env = block_env(venv, port)
    workdir = tmp_path / "quick-start"
    workdir.mkdir()
    checkout = workdir / "file-repository"
    log_path = tmp_path / "quick-start.log"
    with open(log_path, "w") as log:
        shell = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", f"{start}\n{short_walkthrough()}"],
            cwd=workdir,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the block's `make start` and its server stay in this group
        )
    try:
        try:
            shell.wait(timeout=180)
        finally:
            quick_log = log_path.read_text()
        assert shell.returncode == 0, f"{quick_log[-4000:]}\n--- server\n{server_log(checkout)}"
        assert re.search(rf"^Serving on http://127\.0\.0\.1:{port}/ ", quick_log, re.M), quick_log
        page = re.search(
            rf"^Its public page: http://127\.0\.0\.1:{port}/records/(\S+)$", quick_log, re.M
        )
        assert page, quick_log[-4000:]
        assert "<h1>Arbeitslosenquote; 2025 und 2026</h1>" in quick_log
        assert (checkout / "quote.csv").exists()
        assert (checkout / "instance" / "files.sqlite3").exists()  # the defaults, in the clone
        # The short walkthrough: the public read, then 403 (embargo), 404 and 200 (unreleased,
        # for the public and the owner), 200 (the page back).
        after = quick_log[page.end() :]
        assert json.loads(after[: after.index("\n}\n") + 3])["id"] == page.group(1)
        assert re.findall(r"^(\d{3})$", after, re.M) == ["403", "404", "200", "200"]

        result, stdout, stderr = run_block(
            walkthrough(),
            checkout,
            {**env, "BASE": f"http://127.0.0.1:{port}"},
            tmp_path / "walkthrough",
            timeout=120,
        )
    finally:
        stop_group(shell)
    assert result.returncode == 0, (
        f"exit {result.returncode}\n--- stdout\n{stdout[-4000:]}\n"
        f"--- stderr\n{stderr[-4000:]}\n--- server\n{server_log(checkout)}"
    )
    assert stderr == ""

    report, report_v2 = (checkout / "bericht.pdf").read_bytes(), (checkout / "bericht-v2.pdf")
    report_v2 = report_v2.read_bytes()
    assert report.startswith(b"%PDF-1.4\n") and report_v2.startswith(report) and report_v2 != report
    assert (checkout / "folge-1.mp3").read_bytes() == samples.fixture("tone.mp3")
    uploaded = json.loads((checkout / "upload.json").read_text())["files"]
    assert [record["mime_type"] for record in uploaded] == ["application/pdf", "text/csv"]
    assert [record["autoren"] for record in uploaded] == [AUTHORS, AUTHORS]
    assert uploaded[0]["sachschlagwoerter"] == "Arbeitsmarkt; Statistik"
    assert uploaded[0]["beschreibung"] == "Der Arbeitsmarkt in Zahlen; Quoten nach Ländern"
    assert (checkout / "downloaded" / "bericht.pdf").read_bytes() == report
    assert (checkout / "first-kib").read_bytes() == report[:1024]
    assert (checkout / "public-bericht.pdf").read_bytes() == report_v2
    assert (checkout / "bericht-v1.pdf").read_bytes() == report  # a kept version (issue 39)
    assert '"Tabelle 3 korrigiert"' in stdout  # the listed versions
    assert (checkout / "shared-bericht.pdf").read_bytes() == report_v2
    for name in ("reports-2026-public.zip", "reports-2026-mine.zip"):
        with zipfile.ZipFile(checkout / name) as archive:
            assert "manifest.json" in archive.namelist()
    assert "<dc:title>Jahresbericht 2026" in stdout
    assert '<enclosure url="http://127.0.0.1:' in stdout


def test_env_files_with_secrets_stay_out_of_git():
    """docker compose reads every secret from `.env`, and docs/deployment.md suggests keeping
    the settings there: git must not pick it up."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for name in (".env", "docs/.env"):
        ignored = subprocess.run(["git", "check-ignore", "-q", name], cwd=ROOT)
        assert ignored.returncode == 0, f"{name} is not ignored by git"
    assert "`.env`" in (ROOT / "docs" / "deployment.md").read_text()
    assert "(.gitignore keeps it" in (ROOT / "docker-compose.yml").read_text()


def chapter_block(block: str, venv: Path) -> str:
    """A chapter's block with `.venv/` standing for the test's folder (as `VENV` does)."""
    return block.replace(".venv/", f"{venv}/")


def test_the_release_approval_block_runs_with_a_second_account_approving(
    tmp_path: Path, origin: Path
):
    """The block of docs/approval.md in a fresh clone: it restarts the server with
    RELEASE_APPROVAL=on, makes the two accounts, grants the approver and walks the report
    through."""
    checkout = clone(origin, tmp_path / "checkout")
    venv = venv_without_install(tmp_path / "venv", for_later_checkouts=False)
    port = free_port()
    env = block_env(venv, port, BASE=f"http://127.0.0.1:{port}", **ADMIN_ENV)
    shell, stdout, stderr = run_block(
        chapter_block(approval_walkthrough(), venv), checkout, env, tmp_path / "approval", 180
    )
    stop_group(shell)
    assert shell.returncode == 0, f"{stdout}\n{stderr}\n--- server\n{server_log(checkout)}"
    assert stderr == ""
    lines = stdout.splitlines()
    assert lines[0].startswith(f"Serving on http://127.0.0.1:{port}/ ")
    assert lines[2:5] == [
        "Created user autorin@example.org (id 2).",
        "Created user pruefer@example.org (id 3).",
        "pruefer@example.org (id 3) is now an approver.",
    ]
    assert lines[-6:] == ["Jahresbericht", "approved", "1", "approved", "2", "declined"]


def test_the_doi_block_runs_with_made_up_values(tmp_path: Path, origin: Path):
    """The block of docs/dois.md in a fresh clone, its made-up DataCite values sent to the fake
    DataCite: the server's outbox creates the draft and deletes it again, nothing stays owed."""
    checkout = clone(origin, tmp_path / "checkout")
    venv = venv_without_install(tmp_path / "venv", for_later_checkouts=False)
    port = free_port()
    env = block_env(venv, port, BASE=f"http://127.0.0.1:{port}", **ADMIN_ENV)
    block = doi_walkthrough()
    assert f"DATACITE_URL={DATACITE_URL} " in block
    for name, value in MADE_UP.items():
        assert f"DATACITE_{name.upper()}={value}" in block
    with FakeDataCite(**MADE_UP) as datacite:
        block = chapter_block(block, venv).replace(DATACITE_URL, datacite.url)
        shell, stdout, stderr = run_block(block, checkout, env, tmp_path / "dois", 180)
        try:
            assert shell.returncode == 0, f"{stdout}\n{stderr}\n--- server\n{server_log(checkout)}"
            # The released reservation leaves nothing owed once the server's outbox thread ran.
            status_env = {
                **env,
                "PUBLIC_BASE_URL": env["BASE"],
                "DATACITE_URL": datacite.url,
                **{f"DATACITE_{name.upper()}": value for name, value in MADE_UP.items()},
            }
            deadline = time.monotonic() + 60
            while True:
                status = subprocess.run(
                    [sys.executable, "-m", "flask", "--app", "wsgi", "doi", "status"],
                    cwd=checkout,
                    env=status_env,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                done = status.stdout.endswith("0 DOI(s) pending, 0 failing.\n")
                if done or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
        finally:
            stop_group(shell)
    assert stderr == ""
    assert stdout.splitlines()[0].startswith(f"Serving on http://127.0.0.1:{port}/ ")
    assert stdout.splitlines()[-2:] == ["draft", "None"]
    assert status.returncode == 0 and status.stdout.splitlines() == [
        "0 DOI(s) pending, 0 failing."
    ], status.stdout + status.stderr
    assert datacite.dois == {}
    assert [r.status for r in datacite.requests if r.status >= 300] == []
