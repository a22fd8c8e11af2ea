"""A results.html page opened in headless Chromium (Debian's chromium, chromium-driver and
python3-selenium): a script run in it at a given window width, and a screenshot of the page.
Shared by the browser test (tests/reports/test_html_in_browser.py) and
scripts/report-screenshot, so that the picture in the docs is what the test looked at."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any


def why_no_browser() -> str | None:
    """Why Chromium cannot be driven here, or None where it can."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "needs Selenium (Debian's python3-selenium; run with /usr/bin/python3)"
    for program in ("chromium", "chromedriver"):
        if shutil.which(program) is None:
            return f"needs {program} (Debian's chromium and chromium-driver; scripts/test installs them)"
    return None


def open_page(page: Path, width_px: int, script: str, screenshot_scale: float = 1.0,
              screenshot_height_px: int | None = None) -> tuple[Any, bytes]:
    """Runs `script` (a function body that returns a value) in `page` at a window `width_px`
    wide, then screenshots the page grown to its full height (or `screenshot_height_px`),
    drawn at `screenshot_scale` of its CSS pixels."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--hide-scrollbars", f"--force-device-scale-factor={screenshot_scale}",
                 f"--window-size={width_px},1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=options)
    try:
        driver.get(page.as_uri())
        found = driver.execute_script(script)
        height = screenshot_height_px or int(driver.execute_script("return document.documentElement.scrollHeight"))
        driver.set_window_size(width_px, height + 120)
        return found, driver.get_screenshot_as_png()
    finally:
        driver.quit()
