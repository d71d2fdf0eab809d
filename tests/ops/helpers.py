"""Stack selection and small helpers for the operator command tests."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask

from tests.conftest import STACKS

#: Run a test on one stack only, by narrowing the `stack_config` fixture's parameters.
LOCAL_ONLY = pytest.mark.parametrize("stack_config", [STACKS[0]], indirect=True)
S3_ONLY = pytest.mark.parametrize("stack_config", [STACKS[1]], indirect=True)


def storage_keys(app: Flask, prefix: str = "") -> set[str]:
    return set(app.extensions["storage"].iter_keys(prefix))


def lines(output: str) -> list[str]:
    return [line.rstrip() for line in output.splitlines()]


def check_lines(result: Any) -> dict[str, str]:
    """`flask storage check` output as {check name: "ok ..." / "fail ..."}."""
    found = {}
    for line in lines(result.stdout):
        name, _, rest = line.partition(" ")
        found[name] = rest.strip()
    return found
