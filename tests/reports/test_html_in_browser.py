"""results.html in a real browser: a small sweep (with PyTorch twins, and its DDP rows projected
past this machine) rendered by headless
Chromium through Selenium and chromium-driver (Debian's chromium, chromium-driver and
python3-selenium, installed by the set-up). Every chart must have marks, a title and labelled
axes, and nothing may overflow its chart or the page. The screenshot is kept at
$DDPBENCH_SCREENSHOT (build/tests/results-html.png) for anyone to look at.

Skips with the reason where Chromium, its driver or Selenium is missing.
Run: DDPBENCH_BINARY=build/ddpbench /usr/bin/python3 -m unittest -v test_html_in_browser
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path
from typing import Any

SWEEP = {
    "name": "browser-check", "baseline": "single",
    "defaults": {"model": "tiny", "num-classes": 10, "dataset": "synthetic", "synthetic-train-images": 400,
                 "synthetic-test-images": 100, "batch-size": 50, "device": "cpu", "warmup-steps": 2, "threads": 1},
    "rows": [
        {"name": "single", "options": {"strategy": "single"}, "tutorial_seconds": 13.2, "devices": 1},
        {"name": "ddp-2", "options": {"strategy": "ddp", "nproc": 2, "sync-bn": False},
         "tutorial_seconds": 9.8, "devices": 2},
        {"name": "ddp-2-no-overlap", "options": {"strategy": "ddp", "nproc": 2, "overlap": False}, "devices": 2},
    ],
}

# Runs in the page: for every chart, its marks, its title, and every drawn element whose box
# leaves the chart's viewBox; for the page, whether anything is wider than the window.
CHECK_CHARTS = """
const charts = [];
for (const svg of document.querySelectorAll('svg')) {
  const box = svg.viewBox.baseVal;
  const outside = [];
  for (const el of svg.querySelectorAll('rect, circle, path, line, text')) {
    if (el.closest('defs')) continue;
    const b = el.getBBox();
    if (b.x < box.x - 0.5 || b.y < box.y - 0.5 || b.x + b.width > box.x + box.width + 0.5 ||
        b.y + b.height > box.y + box.height + 0.5) {
      outside.push(el.tagName + ' "' + (el.textContent || '').slice(0, 40) + '" at ' +
                   [b.x, b.y, b.width, b.height].map(v => v.toFixed(1)).join(','));
    }
  }
  const title = svg.querySelector(':scope > title');
  charts.push({title: title ? title.textContent : '', marks: svg.querySelectorAll('.mark').length,
               texts: Array.from(svg.querySelectorAll('text')).map(t => t.textContent), outside: outside});
}
return {charts: charts, page_width: document.documentElement.scrollWidth, window_width: window.innerWidth,
        page_height: document.documentElement.scrollHeight};
"""


def why_no_browser() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "needs Selenium (Debian's python3-selenium; run with /usr/bin/python3)"
    for program in ("chromium", "chromedriver"):
        if shutil.which(program) is None:
            return f"needs {program} (Debian's chromium and chromium-driver; scripts/test installs them)"
    return None


class HtmlInBrowserTest(unittest.TestCase):
    def setUp(self) -> None:
        reason = why_no_browser()
        if reason:
            self.skipTest(reason)
        self.scratch = Path(tempfile.mkdtemp(prefix="ddpbench-browser-"))
        self.addCleanup(shutil.rmtree, self.scratch, True)

    def render(self) -> Path:
        sweep = self.scratch / "sweep.json"
        sweep.write_text(json.dumps(SWEEP))
        out = self.scratch / "out"
        binary = os.environ.get("DDPBENCH_BINARY", "build/ddpbench")
        done = subprocess.run([binary, "sweep", "--file", str(sweep), "--out-dir", str(out), "--mode", "faithful",
                               "--reference", "--project", "measured"], capture_output=True, text=True, timeout=600,
                              check=False)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        return out / "results.html"

    def open_in_chromium(self, page: Path) -> tuple[dict[str, Any], bytes]:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = shutil.which("chromium") or "chromium"
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1100,1000"):
            options.add_argument(flag)
        driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=options)
        try:
            driver.get(page.as_uri())
            found = driver.execute_script(CHECK_CHARTS)
            driver.set_window_size(1100, int(found["page_height"]) + 120)
            return found, driver.get_screenshot_as_png()
        finally:
            driver.quit()

    def test_every_chart_has_marks_labels_and_nothing_overflows(self) -> None:
        found, png = self.open_in_chromium(self.render())
        screenshot = Path(os.environ.get("DDPBENCH_SCREENSHOT", self.scratch / "results-html.png"))
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        screenshot.write_bytes(png)
        print(f"screenshot: {screenshot}")

        titles = [chart["title"] for chart in found["charts"]]
        expected = ["Epoch time", "Where a step's time goes", "Speed-up and scaling efficiency",
                    "Step-time distribution", "ddpbench against PyTorch", "Projected images per second"]
        self.assertEqual(len(titles), len(expected), titles)
        for title, start in zip(titles, expected):
            self.assertTrue(title.startswith(start), f"{title!r} is not the {start!r} chart")
        for chart in found["charts"]:
            with self.subTest(chart=chart["title"]):
                self.assertGreater(chart["marks"], 0, "a chart without marks")
                self.assertEqual(chart["outside"], [], "elements outside the chart's box")
                # Axes say their units: seconds, milliseconds, percent, ratios or images/s.
                units = [t for t in chart["texts"] if any(u in t for u in (", s", ", ms", "%", ", x", "(x", "images/s"))]
                self.assertTrue(units, f"no axis label with units among {chart['texts'][:20]}")
        self.assertLessEqual(found["page_width"], found["window_width"], "the page is wider than the window")


if __name__ == "__main__":
    unittest.main()
