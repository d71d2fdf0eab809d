"""One cover made in a process of its own, under limits: the only code that parses a file's
bytes to draw it. app/covers/making.py runs it as a script (`python -I child.py KIND SOURCE
FOLDER SECONDS MEGABYTES`) with nothing of the service imported and no setting or secret in
its environment, and kills it (and what it started) when it runs out of time.

Before it reads a byte it limits itself: its address space to MEGABYTES (a renderer that
loops or a decompression bomb ends with an error, never with the machine's memory), its CPU
time to SECONDS, the files it writes, no core dumps, and a lower scheduling priority so that
requests come first. It writes the pictures (`200.webp`, `200.jpg`, `1200.webp`,
`1200.jpg`) into FOLDER and prints the proportions drawn, `{"width": W, "height": H}`; on
any failure it prints one line saying why and exits 1.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

#: The widths made of every cover, in pixels; each as WebP and as JPEG.
WIDTHS = (200, 1200)
EXTENSIONS = ("webp", "jpg")
#: The tallest and the widest a picture may be, as height / width: a longer page or a
#: panorama is cut (the top, the middle) rather than drawn as a sliver.
TALLEST = 2.0
WIDEST = 0.25
#: Pixels of a decoded image: more is refused (Pillow's decompression-bomb check, as an error).
MAX_PIXELS = 50_000_000
#: The largest file this process may write (a frame, a picture).
MAX_WRITE = 64 * 1024 * 1024
#: Where a video's frame is taken: a tenth into it, at most this many seconds.
LATEST_FRAME_SECONDS = 60.0


def names() -> list[str]:
    """The pictures of one cover, as their keys end (`200.webp`, ...)."""
    return [f"{width}.{ext}" for width in WIDTHS for ext in EXTENSIONS]


def height_for(width: int, source_width: int, source_height: int) -> int:
    """The height of the picture `width` wide of a cover drawn `source_width` by
    `source_height` (the one rule pages and the renderer share)."""
    return max(1, round(width * source_height / source_width))


def limit(seconds: int, megabytes: int) -> None:
    memory = megabytes * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_WRITE, MAX_WRITE))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.nice(10)


def _bounded(image: Any) -> Any:
    """`image` cut to the proportions a cover may have (`TALLEST`, `WIDEST`)."""
    width, height = image.size
    if height > TALLEST * width:
        return image.crop((0, 0, width, round(TALLEST * width)))
    if height < WIDEST * width:
        keep = round(height / WIDEST)
        left = (width - keep) // 2
        return image.crop((left, 0, left + keep, height))
    return image


def from_image(path: Path) -> Any:
    from PIL import Image, ImageOps

    Image.MAX_IMAGE_PIXELS = MAX_PIXELS
    warnings.simplefilter("error", Image.DecompressionBombWarning)
    image = Image.open(path)
    # A JPEG decodes at a fraction of its size when that is still wide enough (DCT scaling).
    image.draft("RGB", (WIDTHS[-1], max(1, WIDTHS[-1] * image.height // image.width)))
    image = ImageOps.exif_transpose(image)
    if image.mode in ("RGBA", "LA", "P", "PA"):
        image = image.convert("RGBA")
        flat = Image.new("RGB", image.size, "white")
        flat.paste(image, mask=image.getchannel("A"))
        return flat
    return image.convert("RGB")


def from_pdf(path: Path) -> Any:
    """The first page, drawn `WIDTHS[-1]` wide; a page taller than `TALLEST` is drawn down
    to there only."""
    import pypdfium2

    document = pypdfium2.PdfDocument(str(path))
    page = document[0]
    width, height = page.get_size()
    if width <= 0 or height <= 0:
        raise ValueError("the first page has no size")
    scale = WIDTHS[-1] / width
    cut = max(0.0, height - TALLEST * width)
    bitmap = page.render(scale=scale, crop=(0, cut, 0, 0), fill_color=(255, 255, 255, 255))
    return bitmap.to_pil().convert("RGB")


def from_video(path: Path, folder: Path) -> Any:
    """A frame a tenth into the video (at most `LATEST_FRAME_SECONDS`), else its first."""
    import imageio_ffmpeg

    ffmpeg = imageio_ffmpeg.get_ffmpeg_exe()
    probe = subprocess.run(
        [ffmpeg, "-hide_banner", "-nostdin", "-threads", "1", "-i", str(path)],
        capture_output=True,
        check=False,
    )
    found = re.search(rb"Duration: (\d+):(\d\d):(\d\d(?:\.\d+)?)", probe.stderr)
    seconds = int(found[1]) * 3600 + int(found[2]) * 60 + float(found[3]) if found else 0.0
    frame = folder / "frame.png"
    said = probe.stderr
    for at in dict.fromkeys((min(seconds / 10, LATEST_FRAME_SECONDS), 0.0)):
        said = subprocess.run(
            [ffmpeg, "-hide_banner", "-nostdin", "-loglevel", "error", "-threads", "1"]
            + ["-ss", f"{at:.3f}", "-i", str(path), "-frames:v", "1", "-an"]
            + ["-threads", "1", "-filter_threads", "1", "-c:v", "png", "-y", str(frame)],
            capture_output=True,
            check=False,
        ).stderr
        if frame.exists() and frame.stat().st_size:
            return from_image(frame)
    last = [line for line in said.decode("utf-8", "replace").splitlines() if line.strip()]
    raise ValueError(f"no frame could be read: {last[-1] if last else 'ffmpeg failed'}")


def draw(kind: str, source: Path, folder: Path) -> dict[str, int]:
    """Every picture of the cover of `source` into `folder`; the proportions drawn."""
    from PIL import Image

    if kind == "pdf":
        image = from_pdf(source)
    elif kind == "video":
        image = from_video(source, folder)
    elif kind == "image":
        image = from_image(source)
    else:
        raise ValueError(f"no cover is drawn of {kind!r}")
    image = _bounded(image)
    width, height = image.size
    for wide in WIDTHS:
        resized = image.resize(
            (wide, height_for(wide, width, height)), Image.Resampling.LANCZOS, reducing_gap=3.0
        )
        # Saved without the source's metadata (no EXIF: no camera, no place).
        resized.save(folder / f"{wide}.webp", "WEBP", quality=80, method=4)
        resized.save(folder / f"{wide}.jpg", "JPEG", quality=85, optimize=True, progressive=True)
    return {"width": width, "height": height}


def main(argv: list[str]) -> int:
    kind, source, folder, seconds, megabytes = argv
    limit(int(seconds), int(megabytes))
    try:
        print(json.dumps(draw(kind, Path(source), Path(folder))))
    except MemoryError:
        print(f"out of memory (more than {megabytes} MB)", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - any failure of a hostile file: one line
        reason = " ".join(str(exc).split()) or type(exc).__name__
        print(f"{type(exc).__name__}: {reason}"[:500], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
