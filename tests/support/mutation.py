"""`make mutate`: mutation testing of the rules a slip in which no user would notice at once.

mutmut (configured in pyproject.toml, `[tool.mutmut]`) copies the project into mutants/, makes
small changes ("mutants") to the functions in SCOPE one at a time and runs the tests that call
them. A mutant no test notices has survived: either a test is missing, or the change cannot
matter. The second kind is listed with its reason in docs/mutation.md; this script prints the
score and every survivor, saying which of them are accepted there and which are new.

Run from the project root: `python -m tests.support.mutation` (what `make mutate` does), or
with mutant name patterns to run part of SCOPE (`... app.pagination.*`).
"""

from __future__ import annotations

import fnmatch
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: The functions mutated: who may see or change a record, the token check and what ends a
#: cached token, list filters, totals and page envelopes, and download ranges. Not the ways
#: PostgreSQL reads a path-filtered page (`_in_order`, `_newest_per_folder`, `_all_matches`):
#: they change how, not which, records are read, and only the PostgreSQL stack reaches them
#: (docs/mutation.md).
SCOPE = [
    # app/files/services.py: access rules, lists and their totals
    "app.files.services.x__owned_by__*",
    "app.files.services.x_visible_to__*",
    "app.files.services.x_find_record__*",
    "app.files.services.x__may_read__*",
    "app.files.services.x_read_record__*",
    "app.files.services.x_embargo_active__*",
    "app.files.services.x_ensure_downloadable__*",
    "app.files.services.x__escape_like__*",
    "app.files.services.x_filtered__*",
    "app.files.services.xǁListingǁ*",
    "app.files.services.x__folder_conditions__*",
    "app.files.services.x_folders_of__*",
    "app.files.services.x__before__*",
    "app.files.services.x_paginate__*",
    "app.files.services.x__owned_count__*",
    "app.files.services.x_keyset_page__*",
    # app/auth/services.py: the token check and what empties the token cache
    "app.auth.services.x_resolve_token__*",
    "app.auth.services.x__note_auth_changes__*",
    "app.auth.services.x__forget_cached_tokens__*",
    "app.auth.services.x__nothing_changed__*",
    "app.auth.services.x_revoke_token__*",
    # app/pagination.py: page envelopes (total, last_page, from/to, page links)
    "app.pagination.x_list_response__*",
    "app.pagination.x_page_envelope__*",
    "app.pagination.x_cursor_envelope__*",
    # app/downloads.py: ranges and conditional requests
    "app.downloads.x__range_applies__*",
    "app.downloads.x_stored_file_response__*",
    "app.downloads.x_download_response__*",
]

ACCEPTED = Path("docs/mutation.md")
DETECTED = {"killed", "timeout", "caught by type check"}


def mutmut(*args: str, capture: bool = False) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).with_name("mutmut")), *args]
    return subprocess.run(command, text=True, capture_output=capture, check=False)


def accepted_survivors() -> dict[str, str]:
    """Mutant name -> reason, from the table in docs/mutation.md."""
    if not ACCEPTED.exists():
        return {}
    rows = re.findall(r"^\| `([^`]+)` \| (.+?) \|$", ACCEPTED.read_text(), re.MULTILINE)
    return dict(rows)


def results(scope: list[str]) -> dict[str, str]:
    """Mutant name -> status, for the mutants in `scope`."""
    listed = mutmut("results", "--all", "true", capture=True).stdout
    statuses = dict(re.findall(r"^\s+(\S+): (.+)$", listed, re.MULTILINE))
    return {
        name: status
        for name, status in statuses.items()
        if any(fnmatch.fnmatch(name, pattern) for pattern in scope)
    }


def main(patterns: list[str]) -> int:
    scope = [p for p in SCOPE if any(fnmatch.fnmatch(p, q) or p.startswith(q) for q in patterns)]
    scope = scope if patterns else SCOPE
    if not scope:
        print(f"no function of SCOPE matches {patterns}", file=sys.stderr)
        return 2
    shutil.rmtree("mutants", ignore_errors=True)  # stale copies would be tested otherwise
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        # The tests run once per mutant: one migrated SQLite file serves all of the runs.
        from tests.conftest import migrate_database

        template = Path(folder) / "template.sqlite3"
        migrate_database(f"sqlite:///{template}", Path(folder))
        os.environ["TEST_SQLITE_TEMPLATE"] = str(template)
        run = mutmut("run", "--max-children", str(os.cpu_count() or 2), *scope)
    minutes = (time.monotonic() - start) / 60
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_minutes = (cpu.ru_utime + cpu.ru_stime) / 60
    statuses = results(scope)
    if run.returncode != 0 or not statuses:
        print(f"mutmut run failed (exit {run.returncode})", file=sys.stderr)
        return 1

    accepted = accepted_survivors()
    detected = [name for name, status in statuses.items() if status in DETECTED]
    survivors = sorted(name for name, status in statuses.items() if status not in DETECTED)
    score = 100 * len(detected) / len(statuses)
    print()
    print(f"Mutation score: {score:.1f} % ({len(detected)} of {len(statuses)} mutants detected)")
    # Wall time depends on what else the machine runs; the CPU time of the runs does not.
    print(
        f"Run time: {minutes:.1f} min; CPU time of the test runs {cpu_minutes:.1f} min "
        f"on {os.cpu_count()} cores (load average now {os.getloadavg()[0]:.1f})"
    )
    new = [name for name in survivors if name not in accepted]
    for name in survivors:
        mark = "accepted" if name in accepted else "NEW"
        print(f"\n[{mark}] {name} ({statuses[name]})")
        if name in accepted:
            print(f"    {accepted[name]}")
        else:
            print(mutmut("show", name, capture=True).stdout.rstrip())
    if new:
        print(f"\n{len(new)} survivor(s) not accepted in {ACCEPTED}: write a test, or say why")
        print("the change cannot matter.")
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
