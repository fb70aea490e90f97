#!/usr/bin/python3
"""Checks that an SVG file is well-formed and draws: parses it as XML, renders it to PNG with
rsvg-convert, and requires the picture to hold at least MIN_COLORS distinct saturated colours
(the data; text and axes are grey) covering at least MIN_INK of its pixels. Used by the
`tessera plot` tests.

usage: check_svg.py FILE.svg [MIN_COLORS] [MIN_INK]     (exit 0: ok; 1: the reason on stderr)
"""
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

from PIL import Image


def main():
    path = sys.argv[1]
    min_colors = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    min_ink = float(sys.argv[3]) if len(sys.argv) > 3 else 0.01
    root = ET.parse(path).getroot()
    if not root.tag.endswith("svg"):
        sys.exit("%s: the root element is %s, not svg" % (path, root.tag))
    with tempfile.NamedTemporaryFile(suffix=".png") as png:
        subprocess.run(["rsvg-convert", "-o", png.name, path], check=True)
        img = Image.open(png.name).convert("RGB")
        colors = img.getcolors(maxcolors=1 << 20) or []
        # Saturated pixels only (anti-aliased grey text would pass any colour count); colours
        # quantised to 32 levels per channel so that edge blends do not count as colours.
        data = [(n, c) for n, c in colors if max(c) - min(c) > 60]
        ink = sum(n for n, _ in data) / (img.width * img.height)
        colors = {tuple(v // 32 for v in c) for n, c in data if n >= 20}
    if len(colors) < min_colors or ink < min_ink:
        sys.exit("%s: %d colours, %.3f of the pixels drawn (want >= %d, >= %.3f)" %
                 (path, len(colors), ink, min_colors, min_ink))
    print("%s: %dx%d, %d colours, %.3f drawn" % (path, img.width, img.height, len(colors), ink))


if __name__ == "__main__":
    main()
