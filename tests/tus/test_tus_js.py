"""tus-js-client, the client Uppy uses, under Node against a real server on both stacks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.tus.conftest import Deployment, MiB, text_content

JS = Path(__file__).resolve().parents[1] / "js"


@pytest.fixture(scope="session")
def node() -> str:
    node = shutil.which("node")
    if node is None or not (JS / "node_modules" / "tus-js-client").is_dir():
        pytest.fail("node or tus-js-client is missing: `make install-test` installs tests/js")
    return node


def run(
    node: str,
    deployment: Deployment,
    data: bytes,
    chunk: int,
    pause_at: int | None = None,
    override_patch: bool = False,
    **metadata: str,
) -> dict:
    path = deployment.tmp_path / "upload.bin"
    path.write_bytes(data)
    args = [
        node,
        str(JS / "upload.mjs"),
        deployment.endpoint,
        deployment.token("alice@example.org"),
        str(path),
        str(chunk),
        json.dumps(metadata),
    ]
    if pause_at is not None:
        args.append(str(pause_at))
    env = {**os.environ, "TUS_OVERRIDE_PATCH": "1" if override_patch else "0"}
    result = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=JS, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def test_tus_js_client_uploads_pauses_and_resumes(node: str, deployment: Deployment):
    data = text_content(11 * MiB + 5, seed="js")
    result = run(
        node,
        deployment,
        data,
        2 * MiB,
        pause_at=4 * MiB,
        filename="bericht.txt",
        titel="Aus dem Browser",
        path="web",
    )
    assert result["outcome"] == "done" and result["pausedAt"] == 4 * MiB
    # The resumed upload asked where to go on, then sent the rest.
    assert result["offsets"][:2] == [2 * MiB, 4 * MiB] and result["offsets"][-1] == len(data)
    record = deployment.record(result["recordId"])
    assert record["titel"] == "Aus dem Browser" and record["path"] == "web"
    assert record["original_name"] == "bericht.txt" and record["size"] == len(data)
    assert deployment.download(result["recordId"]) == data


def test_tus_js_client_small_file_in_the_creation_request(node: str, deployment: Deployment):
    data = b'{"titel": "klein"}'
    result = run(node, deployment, data, 5 * MiB, filename="k.json")
    assert result["offsets"] == [len(data)]  # one request: creation with upload
    record = deployment.record(result["recordId"])
    assert record["mime_type"] == "application/json"
    assert deployment.download(result["recordId"]) == data


def test_tus_js_client_with_override_patch_method(node: str, deployment: Deployment):
    """`overridePatchMethod`: every piece a POST with `X-HTTP-Method-Override: PATCH`."""
    data = text_content(3 * MiB + 7, seed="override")
    result = run(node, deployment, data, MiB, override_patch=True, filename="bericht.txt")
    assert result["outcome"] == "done", result
    assert result["offsets"] == [MiB, 2 * MiB, 3 * MiB, len(data)]
    assert deployment.download(result["recordId"]) == data
