// Numbers in the page's language (<html lang>): "2.3 ms" in English is "2,3 мс" in Russian
// and "2,3 ms" in German. Units come from Intl, which also knows their plurals ("0 байт").

const formats = new Map();

function formatter(options) {
  const key = JSON.stringify(options);
  if (!formats.has(key)) {
    formats.set(key, new Intl.NumberFormat(document.documentElement.lang || undefined, options));
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
