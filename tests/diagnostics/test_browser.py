"""save_html opened in a real headless browser: the origins and the graph picture render.

Chromium comes from the system's packages (Debian's ``chromium``; ``.ci/run`` installs it
when missing). The test is skipped only where no such browser is installed. The screenshot
stays under the test's tmp dir (``screenshot.png``), kept as a CI artifact.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

import diagnostics
import tapegrad as tg
from diagnostics.picture import FILLS

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no Chromium found: `apt-get install -y chromium` (.ci/run installs it)")


def run_browser(exe: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    return subprocess.run(
        [exe, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )


def rgb(colour: str) -> np.ndarray:
    return np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])


@pytest.mark.slow
def test_the_html_report_renders_its_origins_and_picture_in_chromium(tmp_path: Path) -> None:
    exe = browser()
    w = tg.ones((64, 64)).require_grad()
    running = 0.0
    for _ in range(2):
        loss = (w * w).sum()
        loss.backward()
        running = running + loss  # kept-alive  # @running
    (w @ w).tanh()  # hanging activations
    report = diagnostics.leak_report(explain=True)
    path = report.save_html(tmp_path / "leak.html", history=[report, report])
    origins = {r.origin for r in report.rows if r.kind in ("hanging", "kept-alive")}
    del running, loss, w

    url = path.resolve().as_uri()
    dom = run_browser(exe, tmp_path, "--dump-dom", url).stdout
    for origin in origins:
        assert origin in dom  # in the table (the picture wraps long ones)
    assert 'id="graph-picture"><svg' in dom
    assert "local running in test_the_html_report_renders" in dom  # the chain, drawn

    shot = tmp_path / "screenshot.png"
    run_browser(exe, tmp_path, f"--screenshot={shot}", "--window-size=1400,2200", url)
    pixels = (image.imread(shot)[..., :3] * 255).round().astype(int)
    for kind in ("hanging", "kept-alive"):  # node boxes drawn, in their class colour
        filled = np.all(np.abs(pixels - rgb(FILLS[kind])) <= 2, axis=-1).sum()
        assert filled > 2_000, (kind, filled)
