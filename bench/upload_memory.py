"""Upload memory: the server lane's peak RSS growth and answer time per upload, before and after.

Each upload is analysed by showcases/analysis.py (after) and by the committed version of it
(before: the version of BEFORE_COMMIT, imported from a temporary folder), each run in a
fresh process: the file is read and the decoders warmed up on a small image first, then the
peak RSS is reset (/proc/self/clear_refs) and analyse() is timed. The growth is what decoding,
shrinking and the palette add beyond the upload's own bytes. Medians of --runs processes.

    make bench        # or: .venv/bin/python bench/upload_memory.py [--runs N]

Target: every upload ≤ 150 MB of growth after, with the status the browser sees.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import io
import json
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench.database import set_up_django_settings  # noqa: E402 - after sys.path

TARGET_MB = 150
# The server lane before decoding had a memory budget (--before to compare with another).
BEFORE_COMMIT = "718082d"
FIFTY_MP = (8000, 6200)  # 49.6 MP, just under the 50 MP cap
TWELVE_MP = (4000, 3000)


def photo(size: tuple[int, int], *, grain: float) -> Image.Image:
    """Smooth colour with grain, like a phone photo (the browser tests' big_photo)."""
    width, height = size
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    rgb = np.stack(
        [120 + 100 * np.sin(x / 700), 110 + 90 * np.cos(y / 500), 90 + 60 * np.sin((x + y) / 900)],
        axis=-1,
    )
    rgb += np.random.default_rng(12).normal(0, grain, size=rgb.shape).astype(np.float32)
    return Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))


def encoded(image: Image.Image, fmt: str, **params) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **params)
    return buffer.getvalue()


def tiny_chunk_png() -> bytes:
    """A 720 × 720 PNG of random pixels whose zlib stream is cut into one-byte IDAT chunks."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body)
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    rng = np.random.default_rng(5)
    rows = b"".join(b"\x00" + rng.bytes(720 * 3) for _ in range(720))
    stream = zlib.compress(rows, 9)
    header = chunk(b"IHDR", struct.pack(">IIBBBBB", 720, 720, 8, 2, 0, 0, 0))
    idats = b"".join(chunk(b"IDAT", stream[i : i + 1]) for i in range(len(stream)))
    return b"\x89PNG\r\n\x1a\n" + header + idats + chunk(b"IEND", b"")


def uploads() -> dict[str, bytes]:
    """The uploads to measure, by the name the table shows."""
    picture = photo(TWELVE_MP, grain=12)
    second = photo((1920, 1440), grain=12)
    return {
        "single-colour 50 MP WebP": encoded(
            Image.new("RGB", FIFTY_MP, (20, 80, 160)), "WEBP", lossless=True
        ),
        "1-bit 50 MP PNG": encoded(Image.new("1", FIFTY_MP), "PNG"),
        "12 MP JPEG": encoded(picture, "JPEG", quality=90),
        "12 MP MPO": encoded(picture, "MPO", quality=90, save_all=True, append_images=[second]),
        "20 MB PNG of one-byte chunks": tiny_chunk_png(),
        "12 MP progressive JPEG": encoded(picture, "JPEG", quality=90, progressive=True),
        "12 MP PNG": encoded(photo(TWELVE_MP, grain=2), "PNG"),
        "12 MP WebP": encoded(picture, "WEBP", quality=85),
        "12 MP lossless WebP": encoded(photo(TWELVE_MP, grain=2), "WEBP", lossless=True),
        # Just inside the decode budget: the most an accepted upload costs.
        "23.5 MP PNG": encoded(photo((5600, 4200), grain=0), "PNG"),
    }


# --- One measurement, in a fresh process ---------------------------------------------------


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(key):
                return int(line.split()[1]) / 1024
    raise LookupError(key)


def _load(module_path: str):
    if module_path == "after":
        from showcases import analysis

        return analysis
    spec = importlib.util.spec_from_file_location("analysis_before", module_path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def measure(module_path: str, upload_path: str) -> dict:
    """Analyse one upload with one version of analysis.py; return growth, time and status."""
    set_up_django_settings()
    analysis = _load(module_path)
    # Warm up: Numba's kernels, Pillow's plugins and libwebp load outside the measurement.
    for fmt in ("PNG", "JPEG", "WEBP"):
        analysis.analyse(encoded(photo((900, 600), grain=12), fmt))
    data = Path(upload_path).read_bytes()
    gc.collect()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        before = _status_mb("VmRSS")
        peak = lambda: _status_mb("VmHWM")  # noqa: E731
    except OSError:
        # Without /proc: ru_maxrss only shows growth past the warm-up's peak.
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # noqa: E731
    started = time.perf_counter()
    cpu_started = time.process_time()
    try:
        analysis.analyse(data)
        status = "200"
    except analysis.UploadError as error:
        status = str(error.status)
    except Exception as exc:  # what the view does not catch: Django answers 500
        status = f"500 ({type(exc).__name__})"
    return {
        "ms": (time.perf_counter() - started) * 1000,
        "cpu_ms": (time.process_time() - cpu_started) * 1000,
        "mb": max(0.0, peak() - before),
        "status": status,
    }


def run_child(module_path: str, upload_path: str) -> dict:
    child = subprocess.run(
        [sys.executable, __file__, "--child", module_path, upload_path],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(child.stdout.splitlines()[-1])


# --- The table ------------------------------------------------------------------------------


def summary(samples: list[dict]) -> tuple[float, float, float, str]:
    statuses = sorted({s["status"] for s in samples})
    return (
        statistics.median(s["mb"] for s in samples),
        statistics.median(s["ms"] for s in samples),
        statistics.median(s["cpu_ms"] for s in samples),
        "/".join(statuses),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("MODULE", "UPLOAD"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--before", default=BEFORE_COMMIT, help="the commit to compare with (default %(default)s)"
    )
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(*args.child)))
        return
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    with tempfile.TemporaryDirectory(prefix="upload-memory-") as folder:
        before_path = Path(folder, "analysis_before.py")
        before_path.write_text(
            subprocess.run(
                ["git", "show", f"{args.before}:showcases/analysis.py"],
                cwd=BASE_DIR,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        files = {}
        for number, (name, data) in enumerate(uploads().items()):
            files[name] = Path(folder, f"upload-{number}")
            files[name].write_bytes(data)
        versions = {"before": str(before_path), "after": "after"}
        measured = {(name, version): [] for name in files for version in versions}
        # Interleave runs, so a noisy moment on this shared machine does not land on one row.
        for run in range(args.runs):
            for name, path in files.items():
                for version, module in versions.items():
                    measured[(name, version)].append(run_child(module, str(path)))
            print(f"run {run + 1}/{args.runs} done", file=sys.stderr)
        sizes = {name: path.stat().st_size for name, path in files.items()}

    from showcases import analysis

    print(
        f"\nUpload memory: peak RSS growth per upload beyond its bytes, medians of {args.runs} "
        f"fresh processes (decode budget {analysis.MAX_DECODE_BYTES // 2**20} MB, "
        f"{analysis.DECODE_SLOTS} decodes per process)\n"
    )
    print(
        "| upload | bytes | before: MB | ms | CPU ms | status "
        "| after: MB | ms | CPU ms | status | target |"
    )
    print("| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | --- |")
    for name in files:
        old = summary(measured[(name, "before")])
        new = summary(measured[(name, "after")])
        verdict = "ok" if new[0] <= TARGET_MB else "OVER"
        print(
            f"| {name} | {sizes[name]:,} | {old[0]:.0f} | {old[1]:.0f} | {old[2]:.0f} | {old[3]} "
            f"| {new[0]:.0f} | {new[1]:.0f} | {new[2]:.0f} | {new[3]} "
            f"| ≤ {TARGET_MB} MB: {verdict} |"
        )


if __name__ == "__main__":
    main()
