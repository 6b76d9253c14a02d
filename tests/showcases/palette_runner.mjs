// Reads one JSON request a line — {"pixels": base64, "count": n} — and answers each with
// {"swatches": [...], "luminance": x}, running the very palette.js the browser loads.
import { createInterface } from "node:readline";
import { averageLuminance, dominantColors } from "../../showcases/static/showcases/palette.js";

const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  const request = JSON.parse(line);
  const pixels = new Uint8Array(Buffer.from(request.pixels, "base64"));
  const swatches = dominantColors(pixels, request.count ?? 6);
  process.stdout.write(`${JSON.stringify({ swatches, luminance: averageLuminance(pixels) })}\n`);
}
