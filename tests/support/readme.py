"""Running the documents' shell blocks as they stand (the README's and the chapters' in docs/):
what stands in for an installation, and stopping what a block left running in the background."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def venv_without_install(folder: Path, *, for_later_checkouts: bool = True) -> Path:
    """A folder `make VENV=...` takes for an installed virtual environment: its `flask` and
    `python` run this interpreter, and its marker says installed: after every checkout, also
    those made later (a day ahead, which make warns about), or, with `for_later_checkouts`
    false, after those made before it."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(parents=True)
    for name, command in (
        ("python", f'"{sys.executable}"'),
        ("flask", f'"{sys.executable}" -m flask'),
    ):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {command} "$@"\n')
        (bin_dir / name).chmod(0o755)
    marker = folder / ".installed"
    marker.touch()
    if for_later_checkouts:
        later = time.time() + 86400  # newer than the pyproject.toml of a clone made after it
        os.utime(marker, (later, later))
    return folder


def stop_group(shell: subprocess.Popen) -> None:
    """Ends the block's process group (bash, weed, make and its server) and waits for it."""
    try:
        os.killpg(shell.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    shell.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(shell.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.killpg(shell.pid, signal.SIGKILL)
