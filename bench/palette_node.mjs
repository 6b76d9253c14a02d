// palette.js against npm colorthief on the same raw RGBA pixels, under Node.
// Usage: node bench/palette_node.mjs PIXELS.rgba WIDTH HEIGHT RUNS  → one JSON line of medians.
import { readFileSync } from "node:fs";
import { extractPalette, MmcqQuantizer, validateOptions } from "colorthief/internals";
import { averageLuminance, dominantColors } from "../showcases/static/showcases/palette.js";

const [path, width, height, runs] = process.argv.slice(2);
const bytes = readFileSync(path);
const pixels = new Uint8ClampedArray(bytes.buffer, bytes.byteOffset, bytes.length);

function median(work, times) {
  work(); // warm up: the first call includes compiling the function
  const samples = [];
  for (let i = 0; i < times; i += 1) {
    const started = performance.now();
    work();
    samples.push(performance.now() - started);
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)];
}

const ours = median(() => dominantColors(pixels, 6), Number(runs));
const luminance = median(() => averageLuminance(pixels), Number(runs));
const options = validateOptions({ colorCount: 6, quality: 1 });
const theirs = median(
  () => extractPalette(pixels, Number(width), Number(height), options, new MmcqQuantizer()),
  Math.max(3, Math.floor(Number(runs) / 2)),
);
process.stdout.write(`${JSON.stringify({ paletteJs: ours, luminanceJs: luminance, colorthief: theirs })}\n`);
