"""Without a reachable PostgreSQL the PostgreSQL tests skip with the reason, unless required."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_migration_tests(require: bool) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "TEST_POSTGRES_URL": "postgresql+psycopg://postgres@127.0.0.1:1/test",
        "REQUIRE_POSTGRES": "1" if require else "0",
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rs",
            "tests/test_migrations.py::test_migrations_on_an_empty_postgres_match_the_models",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("require", [False, True])
def test_unreachable_postgres_skips_or_fails(require: bool):
    result = run_migration_tests(require)
    if require:
        assert result.returncode == 1, result.stdout
        assert "REQUIRE_POSTGRES=1 but PostgreSQL is not reachable" in result.stdout
        assert "1 error" in result.stdout
    else:
        assert result.returncode == 0, result.stdout
        assert "PostgreSQL is not reachable at" in result.stdout
        assert "1 skipped" in result.stdout
