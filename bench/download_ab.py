"""Downloads through this checkout against an earlier commit, in the same run: both servers on
the same SeaweedFS, the same 200 MiB object each, alternating, with curl on a presigned URL of
the object as the ceiling. For decisions about the download path (e.g. the event-loop pump).

    .venv/bin/python -m bench.download_ab --base f3cb770 [--reps 5] [--ranges 32]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

from bench.common import PYTHON, ROOT, clean_env, free_port, s3_settings, start_s3, workspace


def curl_speed(url: str, *extra: str) -> float:
    out = subprocess.run(
        ["curl", "-sS", *extra, "-o", os.devnull, "-w", "%{speed_download}", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(out) / 2**20


def serve(name: str, root: Path, env: dict[str, str], workdir: Path, source: Path) -> tuple:
    def flask(*args: str) -> None:
        command = [PYTHON, "-m", "flask", "--app", "wsgi", *args]
        subprocess.run(command, cwd=root, env=env, check=True, capture_output=True)

    flask("db", "upgrade")
    flask("create-user", "--email", "a@example.org", "--name", "A", "--password", "pw")
    port = free_port()
    log_file = (workdir / f"{name}.log").open("w")
    process = subprocess.Popen(
        [PYTHON, "-m", "flask", "--app", "wsgi", "serve", "--port", str(port)],
        cwd=root,
        env=env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    time.sleep(3)
    login = '{"email":"a@example.org","password":"pw","token_name":"t"}'
    token = json.loads(
        subprocess.run(
            [
                "curl",
                "-sS",
                "-H",
                "Content-Type: application/json",
                "-d",
                login,
                f"http://127.0.0.1:{port}/api/tokens",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )["token"]
    created = json.loads(
        subprocess.run(
            [
                "curl",
                "-sS",
                "-H",
                f"Authorization: Bearer {token}",
                "-F",
                f"files[]=@{source}",
                f"http://127.0.0.1:{port}/api/files",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    url = f"http://127.0.0.1:{port}/api/public/files/{created['files'][0]['id']}/download"
    return process, url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the earlier commit")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--ranges", type=int, default=32, help="1 MiB Range requests per rep")
    args = parser.parse_args()
    with workspace("download-ab") as workdir:
        base_tree = workdir / "base"
        subprocess.run(
            ["git", "worktree", "add", "-q", str(base_tree), args.base], cwd=ROOT, check=True
        )
        s3 = start_s3(workdir)
        processes = []
        try:
            client = s3.client()
            client.create_bucket(Bucket="download-ab")
            source = workdir / "file.txt"
            with source.open("wb") as file:
                for _ in range(200 * 1024):
                    file.write(os.urandom(512).hex().encode()[:1023] + b"\n")
            client.upload_file(str(source), "download-ab", "direct")
            direct = client.generate_presigned_url(
                "get_object", Params={"Bucket": "download-ab", "Key": "direct"}
            )
            urls = {}
            for name, root in (("base", base_tree), ("this", ROOT)):
                env = clean_env(
                    DATABASE_URL=f"sqlite:///{workdir / name}.sqlite3",
                    RATELIMIT_UPLOADS="1000 per minute",
                    **s3_settings(s3, "download-ab"),
                )
                process, urls[name] = serve(name, root, env, workdir, source)
                processes.append(process)
            results: dict[str, list[float]] = {}
            for _ in range(args.reps):
                results.setdefault("curl presigned S3", []).append(curl_speed(direct))
                for name, url in urls.items():
                    results.setdefault(f"{name}: 200 MiB MiB/s", []).append(curl_speed(url))
                for name, url in urls.items():
                    began = time.monotonic()
                    for i in range(args.ranges):
                        curl_speed(url, "-r", f"{i * 2**20}-{(i + 1) * 2**20 - 1}")
                    rate = args.ranges / (time.monotonic() - began)
                    results.setdefault(f"{name}: 1 MiB ranges/s", []).append(rate)
            for key, values in results.items():
                rounded = [round(v) for v in values]
                print(f"{key:28s} median {statistics.median(values):8.1f}   {rounded}")
        finally:
            for process in processes:
                process.terminate()
            s3.stop()
            subprocess.run(["git", "worktree", "remove", "--force", str(base_tree)], cwd=ROOT)


if __name__ == "__main__":
    main()
