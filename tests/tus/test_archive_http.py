"""A folder archive through the real server (waitress sends it from its event loop)."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile

import requests

from tests.tus.conftest import Deployment, MiB, text_content


def test_archive_streams_from_the_real_server(deployment: Deployment):
    files = {f"teil-{n}.txt": text_content(3 * MiB + n, seed=f"zip{n}") for n in range(3)}
    for name, data in files.items():
        response = requests.post(
            f"{deployment.base}/api/files",
            headers=deployment.auth(),
            files={"files[]": (name, data)},
            data={"path": "archiv/2026"},
            timeout=60,
        )
        assert response.status_code == 201, response.text
    response = requests.get(
        f"{deployment.base}/api/files.zip",
        params={"path": "archiv/"},
        headers=deployment.auth(),
        timeout=120,
    )
    assert response.status_code == 200
    body = response.content
    assert int(response.headers["Content-Length"]) == len(body)
    archive = zipfile.ZipFile(io.BytesIO(body))
    assert archive.testzip() is None
    manifest = json.loads(archive.read("manifest.json"))
    assert sorted(item["entry"] for item in manifest["files"]) == [
        f"archiv/2026/{name}" for name in sorted(files)
    ]
    for item in manifest["files"]:
        data = archive.read(item["entry"])
        assert data == files[item["original_name"]]
        assert hashlib.sha256(data).hexdigest() == item["sha256"]
