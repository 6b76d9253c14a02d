// The page's sentences are templates with named holes ("{main} on the main thread"), filled
// with numbers already formatted in the page's language (numbers.js). A hole with no value is
// left as written, so a missing value shows rather than vanishes.
export function format(template, values) {
  return template.replace(/\{(\w+)\}/g, (match, key) =>
    key in values ? String(values[key]) : match,
  );
}
