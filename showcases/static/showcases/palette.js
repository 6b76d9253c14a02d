// Dominant colours and mean luminance of straight RGBA8 pixels — the palette of docs/palette.md.
// Pure: no DOM, no workers, so Node runs it as it is. showcases/palette.py is its twin; both use
// integer arithmetic (exact in doubles below 2**53) so they agree bit for bit on the same bytes.

const ALPHA_MIN = 128;
const BUCKETS = 1 << 15;
// Weighted squared distance (2·dr² + 4·dg² + 3·db²) under which two colours count as one.
const MERGE_BELOW = 5184;

function roundHalfUp(sum, count) {
  return Math.floor((2 * sum + count) / (2 * count));
}

function hex(r, g, b) {
  return `#${((1 << 24) | (r << 16) | (g << 8) | b).toString(16).slice(1)}`;
}

export function dominantColors(pixels, count = 6) {
  const end = pixels.length - (pixels.length % 4);
  // One record of four doubles per bucket — count, Σr, Σg, Σb — so a pixel touches one cache
  // line, not four arrays. Doubles hold these integer sums exactly below 2**53.
  const acc = new Float64Array(BUCKETS * 4);
  let counted = 0;
  for (let i = 0; i < end; i += 4) {
    if (pixels[i + 3] < ALPHA_MIN) continue;
    const r = pixels[i];
    const g = pixels[i + 1];
    const b = pixels[i + 2];
    const at = (((r >> 3) << 10) | ((g >> 3) << 5) | (b >> 3)) << 2;
    acc[at] += 1;
    acc[at + 1] += r;
    acc[at + 2] += g;
    acc[at + 3] += b;
    counted += 1;
  }
  if (counted === 0 || count <= 0) return [];

  const keys = [];
  for (let key = 0; key < BUCKETS; key += 1) {
    if (acc[key << 2] !== 0) keys.push(key);
  }
  keys.sort((a, b) => acc[b << 2] - acc[a << 2] || a - b);

  const entries = [];
  for (const key of keys) {
    const at = key << 2;
    const n = acc[at];
    const sumR = acc[at + 1];
    const sumG = acc[at + 2];
    const sumB = acc[at + 3];
    const r = roundHalfUp(sumR, n);
    const g = roundHalfUp(sumG, n);
    const b = roundHalfUp(sumB, n);
    const home = entries.find((e) => {
      const dr = r - e.r0;
      const dg = g - e.g0;
      const db = b - e.b0;
      return 2 * dr * dr + 4 * dg * dg + 3 * db * db < MERGE_BELOW;
    });
    if (home) {
      home.n += n;
      home.sr += sumR;
      home.sg += sumG;
      home.sb += sumB;
    } else if (entries.length < count) {
      entries.push({ key, r0: r, g0: g, b0: b, n, sr: sumR, sg: sumG, sb: sumB });
    }
  }

  entries.sort((a, b) => b.n - a.n || a.key - b.key);
  return entries.map((e) => {
    const r = roundHalfUp(e.sr, e.n);
    const g = roundHalfUp(e.sg, e.n);
    const b = roundHalfUp(e.sb, e.n);
    return { hex: hex(r, g, b), r, g, b, share: e.n / counted };
  });
}

export function averageLuminance(pixels) {
  const end = pixels.length - (pixels.length % 4);
  let weighted = 0;
  let counted = 0;
  for (let i = 0; i < end; i += 4) {
    if (pixels[i + 3] < ALPHA_MIN) continue;
    weighted += 2126 * pixels[i] + 7152 * pixels[i + 1] + 722 * pixels[i + 2];
    counted += 1;
  }
  return counted === 0 ? 0 : weighted / (counted * 2550000);
}
