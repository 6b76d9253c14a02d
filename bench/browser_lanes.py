"""The browser lanes of /showcases/workers/ measured in Chromium, beside palette.js under Node.

The real page, served as the browser tests serve it (the whole WSGI app with DEBUG off, the
CSP, the collected and hashed static files), in Debian's headless Chromium. A 12 MP JPEG
(bench/palette.py's photo) is chosen in the page, and each browser lane is run --runs times at
720 px and at full resolution by clicking its button. Each run's decode, read-back (the scaled
draw and getImageData) and palette time (the page's "Analysis": one palette pass and the
luminance, as on the server) are the User Timing measures image-analysis.js records on the
thread that ran it, read from the page for the main lane and from the worker for the worker
lane.

Beside them, palette.js under Node runs the same pass on the same pixels: the page itself
reads them back with image-analysis.js's readPixels (the code both lanes run) from the same
file, and hands them over. One Node process times one run after each run of the two lanes, so
a noisy moment on a busy machine lands on all three, and its compiler warms up as the page's
does (the first run of each is cold). Figures are medians: single runs mean little here.

    .venv/bin/python bench/browser_lanes.py [--runs N]

Needs the bench extra (matplotlib, for the photo), Playwright and Debian's chromium. Runs in
its own database (v10r_lanes_bench) on the server DATABASE_URL names, or on the embedded one.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench.database import environment, migrate, server_url  # noqa: E402 - after sys.path
from bench.palette import photo_12mp  # noqa: E402

DATABASE = "v10r_lanes_bench"
PAGE = "/showcases/workers/"
SIZES = {720: "720 px", 0: "full resolution"}  # the page's work-size radio values
LANES = {"main": "main thread", "worker": "Web Worker"}
ROWS = {**LANES, "node": "palette.js under Node, same pixels"}
TARGET_RATIO = 2.0  # main lane, full resolution: palette time ≤ 2× palette.js under Node
CHUNK_BYTES = 8 * 2**20  # pixels cross from the page in pieces, not one 64 MB string

# The measures of the latest run, by phase, on the thread this runs in (the page or the
# worker); the names are image-analysis.js's MEASURES. url: the module, as the page names it.
READ_MEASURES = """async (url) => {
  const { MEASURES } = await import(url);
  const last = (name) => performance.getEntriesByName(name, "measure").at(-1)?.duration;
  return {
    runs: performance.getEntriesByName(MEASURES.palette, "measure").length,
    decode: last(MEASURES.decode),
    readBack: last(MEASURES.readBack),
    palette: last(MEASURES.palette),
  };
}"""

# Keeps the chosen file's pixels, as both lanes read them back, for PIXEL_CHUNK to hand over.
READ_PIXELS = """async (maxEdge) => {
  const { readPixels } = await import(document.getElementById("palette-demo").dataset.analysisUrl);
  const file = document.getElementById("demo-file").files[0];
  const read = await readPixels(await file.arrayBuffer(), { type: file.type, maxEdge });
  window.__benchPixels = read.pixels;
  return { width: read.width, height: read.height, length: read.pixels.length };
}"""

PIXEL_CHUNK = """async ([start, end]) => {
  const blob = new Blob([window.__benchPixels.subarray(start, end)]);
  const url = await new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
  return url.slice(url.indexOf(",") + 1);
}"""

# The page's palette step, as analyseImage runs it: PASSES palette passes, then the luminance,
# timed as one, on a Uint8ClampedArray like getImageData's. Each line read names a pixel file;
# each answer is one run on it.
NODE_TIMING = """
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
const showcases = process.argv[1];
const { PASSES } = await import(pathToFileURL(`${showcases}/image-analysis.js`));
const { averageLuminance, dominantColors } = await import(pathToFileURL(`${showcases}/palette.js`));
let loaded = null;
let pixels = null;
for await (const path of createInterface({ input: process.stdin })) {
  if (path !== loaded) {
    const bytes = readFileSync(path);
    pixels = new Uint8ClampedArray(bytes.buffer, bytes.byteOffset, bytes.length);
    loaded = path;
  }
  const started = performance.now();
  let swatches = [];
  for (let pass = 0; pass < PASSES; pass += 1) swatches = dominantColors(pixels, 6);
  averageLuminance(pixels);
  const ms = performance.now() - started;
  process.stdout.write(`${JSON.stringify({ ms, hexes: swatches.map((s) => s.hex) })}\\n`);
}
"""


class NodePalette:
    """palette.js in one long-lived Node process; each request is one timed run of the page's
    palette step."""

    def __init__(self) -> None:
        showcases = BASE_DIR / "showcases" / "static" / "showcases"
        self.process = subprocess.Popen(
            ["node", "--input-type=module", "-e", NODE_TIMING, str(showcases)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, pixels: Path) -> dict:
        self.process.stdin.write(f"{pixels}\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise RuntimeError(f"node exited with {self.process.wait(10)}")
        return json.loads(answer)

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(10)


def database_url() -> str:
    """Return the URL of this benchmark's database, created and migrated if need be."""
    parts = urlsplit(server_url())
    url = urlunsplit(parts._replace(path=f"/{DATABASE}"))
    with psycopg.connect(url, dbname="postgres", autocommit=True) as admin:
        exists = admin.execute(
            "SELECT 1 FROM pg_database WHERE datname = %(name)s", {"name": DATABASE}
        ).fetchone()
        if not exists:
            admin.execute(f'CREATE DATABASE "{DATABASE}"')
    migrate(url)
    return url


def run_lane(tab, lane: str) -> list[str]:
    """Click lane's button, wait until the page is idle again; return the swatches it shows."""
    tab.click(f"[data-run={lane}]")
    tab.wait_for_function(
        "() => [...document.querySelectorAll('[data-run]')].every((b) => !b.disabled)",
        timeout=120_000,
    )
    error = tab.text_content("[data-error]")
    if error:
        raise RuntimeError(f"the {lane} lane failed: {error}")
    return tab.eval_on_selector_all(
        f"[data-lane={lane}] .swatch", "(swatches) => swatches.map((s) => s.dataset.hex)"
    )


def export_pixels(tab, max_edge: int, path: Path) -> tuple[int, int]:
    """Write the page's pixels of the chosen file at max_edge to path; return their size."""
    read = tab.evaluate(READ_PIXELS, max_edge)
    with path.open("wb") as out:
        for start in range(0, read["length"], CHUNK_BYTES):
            chunk = tab.evaluate(PIXEL_CHUNK, [start, min(start + CHUNK_BYTES, read["length"])])
            out.write(base64.b64decode(chunk))
    tab.evaluate("() => { delete window.__benchPixels; }")
    return read["width"], read["height"]


def measure(site_url: str, photo: Path, folder: Path, runs: int) -> dict:
    """Run both lanes and Node runs times at each size, a run of each in turn."""
    from playwright.sync_api import sync_playwright

    from tests.browser.conftest import CHROMIUM_ARGS, chromium_path

    executable = chromium_path()
    if executable is None:
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    samples = {(lane, size): [] for size in SIZES for lane in ROWS}
    swatches = {}
    dimensions = {}
    node = NodePalette()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        tab = browser.new_page()
        tab.goto(site_url + PAGE)
        tab.wait_for_selector("#palette-demo[data-ready=true]")
        module = tab.get_attribute("#palette-demo", "data-analysis-url")
        tab.set_input_files("#demo-file", str(photo))
        tab.wait_for_selector("[data-run=main]:not([disabled])")
        for size in SIZES:
            tab.check(f"input[name=work-size][value='{size}']")
            pixels = folder / f"pixels-{size}.rgba"
            dimensions[size] = export_pixels(tab, size, pixels)
            for run in range(1, runs + 1):
                for lane in LANES:
                    swatches[lane, size] = run_lane(tab, lane)
                    thread = tab if lane == "main" else tab.workers[-1]
                    timings = thread.evaluate(READ_MEASURES, module)
                    if timings["runs"] < run:
                        raise RuntimeError(f"the {lane} lane recorded no measures: {timings}")
                    samples[lane, size].append(timings)
                answer = node.run(pixels)
                swatches["node", size] = answer["hexes"]
                samples["node", size].append({"palette": answer["ms"]})
        browser.close()
    node.close()
    return {"samples": samples, "swatches": swatches, "dimensions": dimensions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    url = database_url()
    static_root = tempfile.TemporaryDirectory(prefix="browser-lanes-static-")
    work = tempfile.TemporaryDirectory(prefix="browser-lanes-")
    os.environ.update(environment(url))
    os.environ["DJANGO_STATIC_ROOT"] = static_root.name
    os.environ["DJANGO_SECURE_SSL_REDIRECT"] = "0"  # plain HTTP on loopback
    os.environ["DJANGO_SETTINGS_MODULE"] = "v10r.settings"
    import django

    django.setup()
    from django.core.management import call_command

    from tests.browser.conftest import SiteServer

    # The page names its scripts through the static manifest, as in production.
    call_command("collectstatic", interactive=False, verbosity=0)
    photo = Path(work.name) / "twelve-megapixels.jpg"
    photo.write_bytes(photo_12mp())

    server = SiteServer()
    try:
        measured = measure(server.url, photo, Path(work.name), args.runs)
    finally:
        server.stop()

    # The same pixels give the same palette: a check that Node saw what the lanes saw.
    for (lane, size), hexes in measured["swatches"].items():
        if hexes != measured["swatches"]["node", size]:
            raise RuntimeError(f"the {lane} lane and Node disagree at {SIZES[size]}")

    print(
        "\nThe browser lanes in Chromium: grace_hopper.jpg upscaled to 12 MP, "
        f"medians of {args.runs} runs (ms)\n"
    )
    print("| lane | size | decode | read-back | palette | palette min–max |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    palette_ms = {}
    for size, label in SIZES.items():
        width, height = measured["dimensions"][size]
        for lane, name in ROWS.items():
            runs = measured["samples"][lane, size]
            palette = [run["palette"] for run in runs]
            palette_ms[lane, size] = statistics.median(palette)
            phases = " | ".join(
                f"{statistics.median(run[phase] for run in runs):.0f}" if lane in LANES else "—"
                for phase in ("decode", "readBack")
            )
            print(
                f"| {name} | {label} ({width} × {height}) | {phases} | "
                f"{palette_ms[lane, size]:.0f} | {min(palette):.0f}–{max(palette):.0f} |"
            )

    print()
    for size, label in SIZES.items():
        ratio = palette_ms["main", size] / palette_ms["node", size]
        verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
        target = f" (target ≤ {TARGET_RATIO:.0f}×: {verdict})" if size == 0 else ""
        print(f"- main-lane palette / Node, {label}: {ratio:.2f}×{target}")
    print(
        "- decode = createImageBitmap; read-back = the scaled drawImage + getImageData; "
        'palette = the page\'s "Analysis": one dominantColors pass + averageLuminance'
    )


if __name__ == "__main__":
    main()
