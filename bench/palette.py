"""Palette benchmarks, on a real photograph (matplotlib's grace_hopper.jpg) upscaled to 12 MP.

(a) The server lane end to end, JPEG bytes → palette (showcases/analysis.py, JPEG draft mode
    before the 720 px resize), beside a full Pillow decode + fast-colorthief and a full decode
    + colorthief (quality 10).
(b) palette.py on the full 12 MP RGBA, beside a bare np.bincount of its 15-bit bucket keys.
(c) palette.js under Node on the same RGBA, beside npm colorthief over all pixels (quality 1).
(d) The first and the second POST of the same JPEG to the analyse endpoint after a fresh start
    of gunicorn (deploy/gunicorn.conf.py, one worker), medians of --starts starts: v10r.wsgi,
    which warms palette.py before it serves, beside the same Django application without the
    warm-up (django.core.wsgi:get_wsgi_application()). Each with Numba's cache filled (a
    restart) and empty (the first start after a deploy changed palette.py). The server is
    ready once a GET of the analyse URL answers 405, which loads nothing the analysis uses.

    make bench        # or: .venv/bin/python bench/palette.py [--runs N] [--starts N]
    .venv/bin/python bench/palette.py --fresh-starts-only   # (d) alone

Needs the bench and test extras (pip install -e '.[test,bench]') and `npm install --prefix
bench` (Node only for (c)). (d) runs on its own database, v10r_bench_palette, on the server
DATABASE_URL names or on the embedded one.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import numpy as np
from PIL import Image

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench import database  # noqa: E402 - after sys.path
from bench.timing import milliseconds  # noqa: E402
from tests.deploy import clients  # noqa: E402
from tests.deploy.servers import CONFIG, GUNICORN, Server  # noqa: E402

TWELVE_MP = 12_000_000
DATABASE = "v10r_bench_palette"
ANALYSE_URL = "/showcases/workers/analyse/"
# The same Django application as v10r.wsgi, without the warm-up that module runs.
UNWARMED_APP = "django.core.wsgi:get_wsgi_application()"
# Django accepts the unmasked 32-character secret as the token, beside the cookie.
CSRF_SECRET = "b" * 32
RATIO_TARGET = 3


def photo_12mp() -> bytes:
    """grace_hopper.jpg (512 × 600) upscaled to about 12 MP, as a JPEG."""
    from matplotlib import cbook

    source = Image.open(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)).convert("RGB")
    scale = (TWELVE_MP / (source.width * source.height)) ** 0.5
    size = (round(source.width * scale), round(source.height * scale))
    buffer = io.BytesIO()
    source.resize(size, Image.Resampling.BICUBIC).save(buffer, format="JPEG", quality=92)
    return buffer.getvalue()


def median_ms(work, runs: int) -> float:
    return statistics.median(milliseconds(work, runs, warmups=0))


def lanes(jpeg: bytes, runs: int) -> None:
    """(a) to (c), in this process."""
    database.set_up_django_settings()
    import colorthief
    import fast_colorthief

    from showcases import analysis, palette

    rgba = np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGBA"))
    height, width = rgba.shape[:2]

    # (a) JPEG bytes → palette.
    server = median_ms(lambda: analysis.analyse(jpeg), runs)
    fast = median_ms(
        lambda: fast_colorthief.get_palette(
            np.asarray(Image.open(io.BytesIO(jpeg)).convert("RGBA")), 6, 10
        ),
        runs,
    )
    slow = median_ms(
        lambda: colorthief.ColorThief(io.BytesIO(jpeg)).get_palette(color_count=6, quality=10),
        max(1, runs // 2),
    )
    # Warm up once: the first call loads (or compiles) the Numba kernels.
    palette.dominant_colors(rgba)

    # (b) palette.py against a bare bincount of its own keys.
    flat = rgba.reshape(-1, 4)
    keys = (
        (flat[:, 0].astype(np.intp) >> 3) << 10
        | (flat[:, 1].astype(np.intp) >> 3) << 5
        | (flat[:, 2].astype(np.intp) >> 3)
    )
    ours_py = median_ms(lambda: palette.dominant_colors(rgba), runs)
    bincount = median_ms(lambda: np.bincount(keys, minlength=palette.BUCKETS), runs)

    # (c) palette.js against npm colorthief, in Node.
    with tempfile.NamedTemporaryFile(suffix=".rgba") as raw:
        raw.write(rgba.tobytes())
        raw.flush()
        node = subprocess.run(
            [
                "node",
                str(BASE_DIR / "bench" / "palette_node.mjs"),
                raw.name,
                str(width),
                str(height),
                str(runs),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
    js = json.loads(node.stdout)

    print(
        f"\nPalette benchmarks: grace_hopper.jpg upscaled to {width} × {height} "
        f"({width * height / 1e6:.1f} MP), medians of {runs}\n"
    )
    print("| measurement | ms | ratio | target |")
    print("| --- | ---: | ---: | --- |")
    print(f"| (a) server lane, JPEG bytes → palette | {server:.0f} | | ≤ 150 ms |")
    print(
        f"| (a) full decode + fast-colorthief (quality 10) | {fast:.0f} | "
        f"{fast / server:.2f}× ours | ours ≥ 1.3× faster |"
    )
    print(
        f"| (a) full decode + colorthief (quality 10) | {slow:.0f} | "
        f"{slow / server:.1f}× ours | ours ≥ 10× faster |"
    )
    print(
        f"| (b) palette.py, full 12 MP RGBA | {ours_py:.0f} | "
        f"{ours_py / bincount:.2f}× bincount | ≤ 2× bincount |"
    )
    print(f"| (b) bare np.bincount of the bucket keys | {bincount:.0f} | 1.00 | |")
    print(
        f"| (c) palette.js dominantColors under Node, 12 MP | {js['paletteJs']:.0f} | | ≤ 150 ms |"
    )
    print(f"| (c) palette.js averageLuminance, same pixels | {js['luminanceJs']:.0f} | | |")
    print(
        f"| (c) npm colorthief, all pixels (quality 1) | {js['colorthief']:.0f} | "
        f"{js['colorthief'] / js['paletteJs']:.1f}× ours | ours ≥ 15× faster |"
    )


# --- (d) The first request after a fresh start ----------------------------------------------


class FreshGunicorn(Server):
    """gunicorn from deploy/gunicorn.conf.py with one worker, so both requests meet the same
    process; ready_ms is how long it took to answer at all."""

    def __init__(self, env: dict[str, str], *, app: str) -> None:
        super().__init__("v10r-bench-palette-")
        env = env | {"WEB_CONCURRENCY": "1", "GUNICORN_BIND": f"127.0.0.1:{self.port}"}
        started = time.perf_counter()
        self.start([str(GUNICORN), "-c", str(CONFIG), app], env=env, seconds=120)
        self.ready_ms = (time.perf_counter() - started) * 1000

    def wait_until_answering(self, *, seconds: float) -> None:
        # Not GET / as the tests' servers do: a page would load templates, the database
        # connection and more, which the first analysis should be measured paying.
        deadline = time.monotonic() + seconds
        while True:
            try:
                if clients.get(self.port, ANALYSE_URL, timeout=5).status == 405:
                    return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.process.args} never answered:\n{self.log_text()}")
            time.sleep(0.05)


def multipart(jpeg: bytes) -> tuple[bytes, str]:
    """The form the page posts: the photo in the image field."""
    boundary = "v10r-bench-palette-boundary"
    body = (
        (
            f"--{boundary}\r\n"
            'Content-Disposition: form-data; name="image"; filename="photo.jpg"\r\n'
            "Content-Type: image/jpeg\r\n\r\n"
        ).encode()
        + jpeg
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, f"multipart/form-data; boundary={boundary}"


def analyse_twice(port: int, jpeg: bytes, *, client: str) -> list[dict[str, float]]:
    """POST the photo twice; each answer's round trip and the analysis time it reports."""
    body, content_type = multipart(jpeg)
    headers = {
        "Content-Type": content_type,
        "Cookie": f"csrftoken={CSRF_SECRET}",
        "X-CSRFToken": CSRF_SECRET,
        # A client address of its own per start, as nginx would pass it: the endpoint's rate
        # limit counts per address, across starts and runs of this benchmark.
        "X-Forwarded-For": client,
    }
    answers = []
    for _ in range(2):
        response = clients.request(
            port, "POST", ANALYSE_URL, timeout=60, headers=headers, body=body
        )
        if response.status != 200:
            raise RuntimeError(f"POST {ANALYSE_URL} answered {response.status}: {response.body}")
        answers.append(
            {
                "ms": response.seconds * 1000,
                "analysis_ms": json.loads(response.body)["analysisMs"],
            }
        )
    return answers


def prepare(url: str, static_root: Path) -> dict[str, str]:
    """Create and migrate the database (kept between runs); return the web environment."""
    database.keep_database(url)
    return database.web_environment(
        url,
        DJANGO_SETTINGS_MODULE="v10r.settings",
        # Nothing here serves static files; an empty folder keeps WhiteNoise from warning.
        DJANGO_STATIC_ROOT=str(static_root),
    )


def fill_cache(env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-c", "from showcases import palette; palette.warm()"],
        cwd=BASE_DIR,
        env=env,
        check=True,
    )


def fresh_starts(jpeg: bytes, starts: int) -> None:
    """(d): the table of first and second requests after fresh starts."""
    url = urlunsplit(urlsplit(database.server_url())._replace(path=f"/{DATABASE}"))
    apps = {"v10r.wsgi (warms)": "v10r.wsgi", "without warming": UNWARMED_APP}
    caches = ["filled", "empty"]
    measured = {(app, cache): [] for app in apps for cache in caches}
    with tempfile.TemporaryDirectory(prefix="v10r-bench-palette-") as folder:
        static_root = Path(folder, "static")
        static_root.mkdir()
        env = prepare(url, static_root)
        # NUMBA_CACHE_DIR replaces showcases/__pycache__, so neither a previous run nor
        # another checkout decides which rows compile.
        filled = Path(folder, "numba-filled")
        fill_cache(env | {"NUMBA_CACHE_DIR": str(filled)})
        number = 0
        # Interleaved, so a noisy moment on a busy machine does not land on one row.
        for start in range(starts):
            for (app, cache), samples in measured.items():
                number += 1
                numba = filled if cache == "filled" else Path(folder, f"numba-empty-{number}")
                server = FreshGunicorn(env | {"NUMBA_CACHE_DIR": str(numba)}, app=apps[app])
                try:
                    client = f"198.51.100.{number % 250 + 1}"
                    first, second = analyse_twice(server.port, jpeg, client=client)
                finally:
                    server.stop()
                samples.append({"ready_ms": server.ready_ms, "first": first, "second": second})
            print(f"start {start + 1}/{starts} done", file=sys.stderr)

    print(
        f"\n(d) The server lane after a fresh start: gunicorn (deploy/gunicorn.conf.py, one "
        f"worker) POSTed the 12 MP JPEG ({len(jpeg) / 1e6:.1f} MB) twice, medians of "
        f"{starts} starts; ms are round trips, analysis ms what the page shows\n"
    )
    print(
        "| application | Numba cache | ready after ms | first ms | second ms | first ÷ second "
        "| first analysis ms | second analysis ms | target |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for (app, cache), samples in measured.items():
        ready = statistics.median(s["ready_ms"] for s in samples)
        first = statistics.median(s["first"]["ms"] for s in samples)
        second = statistics.median(s["second"]["ms"] for s in samples)
        first_analysis = statistics.median(s["first"]["analysis_ms"] for s in samples)
        second_analysis = statistics.median(s["second"]["analysis_ms"] for s in samples)
        ratio = first / second
        if app == "without warming":
            target = ""
        else:
            verdict = "ok" if ratio <= RATIO_TARGET else "OVER"
            target = f"first ≤ {RATIO_TARGET}× second: {verdict}"
        print(
            f"| {app} | {cache} | {ready:.0f} | {first:.0f} | {second:.0f} | {ratio:.2f}× "
            f"| {first_analysis:.0f} | {second_analysis:.0f} | {target} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--starts", type=int, default=3, help="fresh starts per row of (d)")
    parser.add_argument("--fresh-starts-only", action="store_true", help="run (d) alone")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.starts < 1:
        parser.error("--starts must be at least 1")

    jpeg = photo_12mp()
    if not args.fresh_starts_only:
        lanes(jpeg, args.runs)
    fresh_starts(jpeg, args.starts)


if __name__ == "__main__":
    main()
