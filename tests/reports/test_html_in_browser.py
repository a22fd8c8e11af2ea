"""results.html in a real browser: a small sweep (with PyTorch twins, its DDP rows projected
past this machine, rows whose twins cannot run and a row that cannot run here) rendered by
headless Chromium through Selenium and chromium-driver (Debian's chromium, chromium-driver and
python3-selenium, installed by the set-up). Every chart must have marks, a title and labelled
axes, nothing may overflow its chart or the page, and at 1280 and 800 px no table row may be
taller than three lines of text (a reason belongs in a note under its table, not in a cell).
The screenshot is kept at $DDPBENCH_SCREENSHOT (build/tests/results-html.png).

Skips with the reason where Chromium, its driver or Selenium is missing.
Run: DDPBENCH_BINARY=build/ddpbench /usr/bin/python3 -m unittest -v test_html_in_browser
(DDPBENCH_HTML=results.html checks a page already rendered, e.g. by another build.)
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "lib"))
from browser_page import open_page, why_no_browser  # noqa: E402

SWEEP = {
    "name": "browser-check", "baseline": "single",
    "defaults": {"model": "tiny", "num-classes": 10, "dataset": "synthetic", "synthetic-train-images": 400,
                 "synthetic-test-images": 100, "batch-size": 50, "device": "cpu", "warmup-steps": 2, "threads": 1},
    "rows": [
        {"name": "single", "options": {"strategy": "single"}, "tutorial_seconds": 13.2, "devices": 1},
        {"name": "ddp-2", "options": {"strategy": "ddp", "nproc": 2, "sync-bn": False},
         "tutorial_seconds": 9.8, "devices": 2},
        {"name": "ddp-2-no-overlap", "options": {"strategy": "ddp", "nproc": 2, "overlap": False}, "devices": 2},
        # SyncBatchNorm on CPU ranks: compared with PyTorch without it on both sides.
        {"name": "ddp-2-sync-bn", "options": {"strategy": "ddp", "nproc": 2, "sync-bn": True}, "devices": 2},
        # PyTorch's DataParallel scatters over CUDA devices only: a twin skipped with its reason.
        {"name": "dp-2", "options": {"strategy": "dp", "devices": "cpu,cpu"}, "devices": 2},
        # A reason with a word longer than any window (a path): it wraps, the page does not widen.
        {"name": "single-2", "options": {"strategy": "single"}, "devices": 1,
         "no_twin": "see /" + "very-long-folder-name/" * 20 + "reason.txt"},
        # Needs a SLURM allocation: the row itself skipped, with a long reason.
        {"name": "ddp-2node", "options": {"strategy": "ddp", "nproc": 2}, "devices": 2, "nodes": 2},
    ],
}

# Runs in the page: every table row's height in lines of text (the distinct line boxes of its
# tallest cell), and the rows taller than three lines.
CHECK_ROWS = """
const rows = [];
for (const tr of document.querySelectorAll('tr')) {
  let lines = 0;
  for (const cell of tr.children) {
    const range = document.createRange();
    range.selectNodeContents(cell);
    const tops = new Set();
    for (const r of range.getClientRects()) if (r.height > 0) tops.add(Math.round(r.top));
    lines = Math.max(lines, tops.size);
  }
  rows.push({text: tr.textContent.slice(0, 80), lines: lines});
}
return {rows: rows, tall: rows.filter(r => r.lines > 3), page_width: document.documentElement.scrollWidth,
        window_width: window.innerWidth};
"""

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


class HtmlInBrowserTest(unittest.TestCase):
    def setUp(self) -> None:
        reason = why_no_browser()
        if reason:
            self.skipTest(reason)
        self.scratch = Path(tempfile.mkdtemp(prefix="ddpbench-browser-"))
        self.addCleanup(shutil.rmtree, self.scratch, True)

    def render(self) -> Path:
        given = os.environ.get("DDPBENCH_HTML")
        if given:
            return Path(given).resolve()
        sweep = self.scratch / "sweep.json"
        sweep.write_text(json.dumps(SWEEP))
        out = self.scratch / "out"
        binary = os.environ.get("DDPBENCH_BINARY", "build/ddpbench")
        done = subprocess.run([binary, "sweep", "--file", str(sweep), "--out-dir", str(out), "--mode", "faithful",
                               "--reference", "--project", "measured"], capture_output=True, text=True, timeout=600,
                              check=False)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        return out / "results.html"

    def test_every_chart_has_marks_labels_and_nothing_overflows(self) -> None:
        page = self.render()
        found, png = open_page(page, 1100, CHECK_CHARTS)
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

        # Every table row at most three lines tall, on a laptop's window and a narrow one; the
        # page never wider than the window (a wide table scrolls in its own box).
        for width in (1280, 800):
            with self.subTest(width=width):
                rows, _ = open_page(page, width, CHECK_ROWS)
                self.assertGreater(len(rows["rows"]), 10, "the tables' rows were not found")
                self.assertEqual(rows["tall"], [], f"rows taller than three lines at {width} px")
                self.assertLessEqual(rows["page_width"], rows["window_width"], f"the page is wider than {width} px")


if __name__ == "__main__":
    unittest.main()
