"""Cover pictures (issue 50): what making one costs, and serving one against a public read.

Making: `app.covers.making.render` (the limited child process, production limits) on a
200-page PDF, a 4000 x 3000 JPEG and a 10-minute 720p video, each made here; wall time and
the child's peak RSS (ffmpeg's for the video), medians of `--reps`. Serving: one `flask
serve` on PostgreSQL and local storage, one released PDF whose cover its own thread made;
`wrk` (1 thread, 8 connections) alternating `GET /records/{id}/cover/200.webp` and
`GET /api/public/files/{id}` of the same record; target: cover requests/s >= the JSON
read's (cost ratio <= 1). The same again on a server `without="record-cache"` (the cache
that keeps the record and the cover it shows: its figure with and without).

    python -m bench.covers [--reps 3] [--duration 10] [--only making|serving]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import time
import zlib

from bench.common import (
    PYTHON,
    ROOT,
    Report,
    app_server,
    log,
    login,
    make_user,
    median,
    migrated_postgres,
    print_table,
    request,
    workspace,
)
from bench.load import measured, wrk

#: Draws one cover in a process of its own, so that its children's peak RSS is its own.
MEASURE = """
import json, resource, sys, tempfile, time
from pathlib import Path
from app.covers.making import render
with tempfile.TemporaryDirectory() as folder:
    started = time.perf_counter()
    size = render(sys.argv[1], Path(sys.argv[2]), Path(folder), 30, 512)
    seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_mib": peak, "size": size}))
"""


def pdf(pages: int) -> bytes:
    """A report of `pages` text pages, each its own compressed content stream."""
    objects = [b"<</Type /Catalog /Pages 2 0 R>>", b""]
    font = b"<</Type /Font /Subtype /Type1 /BaseFont /Helvetica>>"
    objects.append(font)
    kids = []
    for page in range(pages):
        lines = b"".join(
            b"BT /F1 10 Tf 50 %d Td (Seite %d, Zeile %d: Arbeitsmarkt und Quote) Tj ET\n"
            % (800 - 14 * line, page + 1, line)
            for line in range(50)
        )
        stream = zlib.compress(b"0.2 0.3 0.8 rg 50 760 495 60 re f\n" + lines)
        objects.append(
            b"<</Length %d /Filter /FlateDecode>>stream\n" % len(stream) + stream + b"\nendstream"
        )
        objects.append(
            b"<</Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents %d 0 R "
            b"/Resources <</Font <</F1 3 0 R>>>>>>" % len(objects)
        )
        kids.append(b"%d 0 R" % len(objects))
    objects[1] = b"<</Type /Pages /Kids [%s] /Count %d>>" % (b" ".join(kids), pages)
    from tests.covers.conftest import raw_pdf

    return raw_pdf(objects)


def jpeg(path, width: int = 4000, height: int = 3000) -> None:
    from PIL import Image

    noise = Image.effect_noise((width, height), 40).convert("RGB")
    gradient = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    Image.blend(noise, gradient, 0.6).save(path, "JPEG", quality=90)


def video(path, seconds: int = 600) -> None:
    import imageio_ffmpeg

    source = f"testsrc2=size=1280x720:rate=25:duration={seconds}"
    command = [imageio_ffmpeg.get_ffmpeg_exe(), "-loglevel", "error", "-y", "-f", "lavfi"]
    command += ["-i", source, "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"]
    subprocess.run([*command, str(path)], check=True)


def making(work, reps: int) -> dict:
    sources = {
        "pdf-200-pages": ("pdf", work / "report.pdf"),
        "jpeg-4000x3000": ("image", work / "photo.jpg"),
        "video-10-min-720p": ("video", work / "talk.mp4"),
    }
    sources["pdf-200-pages"][1].write_bytes(pdf(200))
    jpeg(sources["jpeg-4000x3000"][1])
    log("making a 10-minute 720p video (a minute or two)")
    video(sources["video-10-min-720p"][1])
    results = {}
    for name, (kind, path) in sources.items():
        runs = []
        for _ in range(reps):
            done = subprocess.run([PYTHON, "-c", MEASURE, kind, str(path)], cwd=ROOT,
                                  capture_output=True, text=True, check=True)  # fmt: skip
            runs.append(json.loads(done.stdout))
        results[name] = {
            "bytes": path.stat().st_size,
            "seconds": median(r["seconds"] for r in runs),
            "peak_mib": median(r["peak_mib"] for r in runs),
        }
    return results


def serving(stack: contextlib.ExitStack, reps: int, duration: int, without: str = "") -> dict:
    work, _, env = migrated_postgres(stack, "covers")
    make_user(env, "owner@example.org", "bench-password")
    server = app_server("covers", env, work, without=without)
    stack.callback(server.stop)
    token = login(server.port, "owner@example.org", "bench-password")
    sample = work / "report.pdf"
    sample.write_bytes(pdf(2))
    form = ["-F", f"files[]=@{sample}", "-F", "freigabe=true"]
    auth = ["-H", f"Authorization: Bearer {token}"]
    command = ["curl", "-sf", *auth, *form, f"{server.base_url}/api/files"]
    done = subprocess.run(command, capture_output=True, check=True)
    record = json.loads(done.stdout)["files"][0]["id"]
    cover, read = f"/records/{record}/cover/200.webp", f"/api/public/files/{record}"
    for _ in range(100):  # the server's own thread makes it
        if request(server.port, "GET", cover)[0] == 200:
            break
        time.sleep(0.1)
    rates: dict[str, list[float]] = {"cover": [], "json": []}
    for rep in range(reps):
        order = [("cover", cover), ("json", read)]
        for name, path in order if rep % 2 == 0 else order[::-1]:
            result = measured(wrk(server.base_url, [(path, {})], duration, connections=8))
            assert not result["refused"], result
            rates[name].append(result["rps"])
    return {name: median(values) for name, values in rates.items()} | {"runs": rates}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run [10]")
    parser.add_argument("--only", choices=["making", "serving"])
    args = parser.parse_args()
    report = Report("covers", vars(args))
    made, served = {}, {}
    with contextlib.ExitStack() as stack:
        if args.only != "making":
            served = {w or "with": serving(stack, args.reps, args.duration, w)
                      for w in ("", "record-cache")}  # fmt: skip
        if args.only != "serving":
            made = making(stack.enter_context(workspace("covers-sources")), args.reps)
    report.data = {"making": made, "serving": served}
    rows = [[n, r["bytes"], r["seconds"], r["peak_mib"]] for n, r in made.items()]
    print_table(["source", "bytes", "seconds", "peak MiB"], rows)
    for name, result in made.items():
        report.check(f"make {name}", result["seconds"], 30.0, False, " s")
    for variant, rates in served.items():
        ratio = rates["json"] / rates["cover"]
        log(f"{variant}: cover {rates['cover']:.0f} req/s, public JSON read {rates['json']:.0f}")
        what = "" if variant == "with" else f" (without {variant})"
        report.check(f"cost of a cover / a public JSON read{what}", ratio, 1.0, False)
    report.save()


if __name__ == "__main__":
    main()
