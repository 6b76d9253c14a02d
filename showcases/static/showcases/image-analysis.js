// The work both lanes run: decode → downscale → palette. Shared by the main thread and the
// worker, so the page compares identical work in two places, not two implementations.
import { averageLuminance, dominantColors } from "./palette.js";

export const MAX_EDGE = 720;
// One palette pass, as the server lane runs: the page shows the three lanes' "Analysis" side
// by side, so each must time the same work.
export const PASSES = 1;

// Each phase is also a User Timing measure on the timeline of the thread that ran it (the
// page's or the worker's), so DevTools and bench/browser_lanes.py can see where a run went.
export const MEASURES = {
  decode: "image-analysis: decode",
  readBack: "image-analysis: read-back",
  palette: "image-analysis: palette",
};

function measure(name, start, end) {
  performance.measure(name, { start, end });
  return end - start;
}

// The pixels the palette sees: bytes (an ArrayBuffer or view of an encoded image) decoded,
// shrunk to maxEdge on the longest side (0 keeps every pixel) and read back as straight RGBA.
export async function readPixels(bytes, { type = "", maxEdge = MAX_EDGE } = {}) {
  const started = performance.now();
  // No colour management and no premultiplication: the palette must see the file's own bytes,
  // as Pillow does on the server.
  const bitmap = await createImageBitmap(new Blob([bytes], { type }), {
    colorSpaceConversion: "none",
    premultiplyAlpha: "none",
  });
  const decoded = performance.now();
  const longest = Math.max(bitmap.width, bitmap.height);
  const scale = maxEdge > 0 && longest > maxEdge ? maxEdge / longest : 1;
  const width = Math.max(1, Math.round(bitmap.width * scale));
  const height = Math.max(1, Math.round(bitmap.height * scale));
  const canvas = new OffscreenCanvas(width, height);
  const context = canvas.getContext("2d", { willReadFrequently: true });
  // Chromium gives no context, rather than throwing, when a canvas this size will not fit in
  // memory: say so the way an allocation failure does.
  if (!context) {
    bitmap.close();
    throw new RangeError(`no memory for a ${width} × ${height} canvas`);
  }
  context.drawImage(bitmap, 0, 0, width, height);
  bitmap.close();
  const pixels = context.getImageData(0, 0, width, height).data;
  const readBack = performance.now();
  return {
    pixels,
    width,
    height,
    decodeMs: measure(MEASURES.decode, started, decoded),
    readBackMs: measure(MEASURES.readBack, decoded, readBack),
  };
}

// The share of pixels the palette leaves out as transparent (palette.js's ALPHA_MIN), so the
// page can say its shares are of the rest. Outside the timed analysis: the page's own note.
const ALPHA_MIN = 128;
function transparentShare(pixels) {
  const count = Math.floor(pixels.length / 4);
  let transparent = 0;
  for (let i = 3; i < count * 4; i += 4) if (pixels[i] < ALPHA_MIN) transparent += 1;
  return count === 0 ? 0 : transparent / count;
}

// readPixels, then PASSES palette passes and the luminance: the page's "Analysis".
export async function analyseImage(bytes, { type = "", maxEdge = MAX_EDGE } = {}) {
  const { pixels, width, height, decodeMs, readBackMs } = await readPixels(bytes, {
    type,
    maxEdge,
  });
  const started = performance.now();
  let swatches = [];
  let passes = 0;
  for (; passes < PASSES; passes += 1) swatches = dominantColors(pixels, 6);
  const luminance = averageLuminance(pixels);
  const analysisMs = measure(MEASURES.palette, started, performance.now());
  const transparent = transparentShare(pixels);
  return {
    width,
    height,
    swatches,
    luminance,
    transparent,
    // The page shows decode and read-back as one "Decode", bytes to pixels, as the server
    // lane counts it; readBackMs says how much of that was the canvas.
    decodeMs: decodeMs + readBackMs,
    readBackMs,
    analysisMs,
    passes,
  };
}

// The photo's size and a copy that fits in maxWidth × maxHeight, for the page's preview. Run in
// a worker: decoding and shrinking a large photo takes seconds, which on the page's thread would
// freeze the page before any lane has run.
export async function previewImage(blob, { maxWidth, maxHeight }) {
  const full = await createImageBitmap(blob);
  const { width, height } = full;
  const scale = Math.min(1, maxWidth / width, maxHeight / height);
  try {
    const bitmap = await createImageBitmap(full, {
      resizeWidth: Math.max(1, Math.round(width * scale)),
      resizeHeight: Math.max(1, Math.round(height * scale)),
      resizeQuality: "medium",
    });
    return { width, height, bitmap };
  } finally {
    full.close();
  }
}
