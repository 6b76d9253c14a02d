// The work both lanes run: decode → downscale → palette. Shared by the main thread and the
// worker, so the page compares identical work in two places, not two implementations.
import { averageLuminance, dominantColors } from "./palette.js";

export const MAX_EDGE = 720;
export const PASSES = 3;

// bytes: an ArrayBuffer (or view) of an encoded image. maxEdge: 0 keeps every pixel.
export async function analyseImage(bytes, { type = "", maxEdge = MAX_EDGE, passes = PASSES } = {}) {
  const started = performance.now();
  // No colour management and no premultiplication: the palette must see the file's own bytes,
  // as Pillow does on the server.
  const bitmap = await createImageBitmap(new Blob([bytes], { type }), {
    colorSpaceConversion: "none",
    premultiplyAlpha: "none",
  });
  const longest = Math.max(bitmap.width, bitmap.height);
  const scale = maxEdge > 0 && longest > maxEdge ? maxEdge / longest : 1;
  const width = Math.max(1, Math.round(bitmap.width * scale));
  const height = Math.max(1, Math.round(bitmap.height * scale));
  const canvas = new OffscreenCanvas(width, height);
  const context = canvas.getContext("2d", { willReadFrequently: true });
  context.drawImage(bitmap, 0, 0, width, height);
  bitmap.close();
  const pixels = context.getImageData(0, 0, width, height).data;
  const decoded = performance.now();

  let swatches = [];
  for (let pass = 0; pass < passes; pass += 1) swatches = dominantColors(pixels, 6);
  const luminance = averageLuminance(pixels);
  const finished = performance.now();
  return {
    width,
    height,
    swatches,
    luminance,
    decodeMs: decoded - started,
    analysisMs: finished - decoded,
  };
}
