// Numbers in the page's language (<html lang>): "2.3 ms" in English is "2,3 мс" in Russian
// and "2,3 ms" in German. Units come from Intl, which also knows their plurals ("0 байт").

// The page's language; none outside a page (Node's tests), where Intl uses its default.
const language = () => globalThis.document?.documentElement.lang || undefined;

const formats = new Map();

function formatter(options) {
  const key = JSON.stringify(options);
  if (!formats.has(key)) {
    formats.set(key, new Intl.NumberFormat(language(), options));
  }
  return formats.get(key);
}

// One decimal under 10 ms, where it still means something; whole milliseconds above.
export function milliseconds(value) {
  const digits = value < 10 ? 1 : 0;
  return formatter({
    style: "unit",
    unit: "millisecond",
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  }).format(value);
}

export function seconds(value) {
  return formatter({ maximumFractionDigits: 3 }).format(value);
}

export function bytes(value) {
  return formatter({ style: "unit", unit: "byte", unitDisplay: "long" }).format(value);
}

// A file's size as people read it: kilobytes under a tenth of a megabyte (2**20 bytes, the
// server's unit too), megabytes with one decimal above.
export function fileSize(value) {
  const megabytes = value / 2 ** 20;
  if (megabytes < 0.1) {
    return formatter({ style: "unit", unit: "kilobyte", maximumFractionDigits: 0 }).format(
      Math.max(1, value / 1024),
    );
  }
  return formatter({ style: "unit", unit: "megabyte", maximumFractionDigits: 1 }).format(megabytes);
}

// share: a fraction (0.123 → "12.3%", "12,3 %").
export function percent(share) {
  return formatter({ style: "percent", minimumFractionDigits: 1, maximumFractionDigits: 1 }).format(
    share,
  );
}

// Pixel sizes read as "4000 × 3000", never "4,000 × 3,000": no grouping.
export function pixels(value) {
  return formatter({ useGrouping: false }).format(value);
}

// Whole counts, grouped as the language groups them ("3 600" in Russian).
export function count(value) {
  return formatter({ maximumFractionDigits: 0 }).format(value);
}

const pluralRules = new Intl.PluralRules(language());

// forms: the page's words for each plural category of its language (core/plurals.py),
// from which the language's own rule picks: "1 кадр", "2 кадра", "5 кадров", "21 кадр".
export function plural(forms, value) {
  return forms[pluralRules.select(value)] ?? forms.other;
}

// A pixel count in millions, one decimal at most: 81000000 → "81", 50400000 → "50.4".
export function megapixels(count) {
  return formatter({ maximumFractionDigits: 1 }).format(count / 1_000_000);
}
