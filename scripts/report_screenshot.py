"""The README's screenshot of a report: report.html as headless Chromium shows it, 1440 px wide.

    .venv/bin/python scripts/report_screenshot.py REPORT_HTML [--out docs/images/report.png] [--height 1000]

REPORT_HTML is a report page, e.g. `probes-demo/reports/intergroup-empathy/report.html` from
`probes demo`. The browser is the system's Chromium through Playwright (scripts/report_browser.py);
a page that logs a console error or fails to load a resource is refused, not photographed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from report_browser import DESKTOP, chromium_path, screenshot

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="a report.html")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "images" / "report.png")
    parser.add_argument("--height", type=int, default=DESKTOP[1], help="the viewport's height in pixels")
    args = parser.parse_args(argv)
    if not args.report.is_file():
        parser.error(f"{args.report} is not a file")
    if chromium_path() is None:
        print("report_screenshot.py: no Chromium found (scripts/setup.sh installs it, as root)", file=sys.stderr)
        return 1
    out = screenshot(args.report, args.out, (DESKTOP[0], args.height))
    print(f"report_screenshot.py: wrote {out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
