"""`make screenshots`: the four pictures of docs/pages.md, from the browser test's
screenshots (test-artifacts/pages/), made small: 800 pixels wide, 64 colours."""

from __future__ import annotations

import sys
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "pages"
TARGET = ROOT / "docs" / "screenshots"
PAGES = ("front", "record-pdf", "record-csv", "record-audio")
WIDTH = 800


def main() -> int:
    TARGET.mkdir(parents=True, exist_ok=True)
    for name in PAGES:
        source = ARTIFACTS / f"{name}.png"
        if not source.is_file():
            print(f"{source} is missing: run tests/pages/test_pages_in_browser.py first")
            return 1
        with Image.open(source) as image:
            height = round(image.height * WIDTH / image.width)
            small = image.convert("RGB").resize((WIDTH, height), Image.Resampling.LANCZOS)
        target = TARGET / f"{name}.png"
        small.quantize(colors=64, dither=Image.Dither.NONE).save(target, optimize=True)
        print(f"{target.relative_to(ROOT)}: {target.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
