// Which of the demo's three formats a file is, by its first bytes rather than its name: the
// tests Pillow's plugins make on the server (showcases/analysis.py), so a file the page accepts
// is one the server lane reads too. A GIF renamed .jpg is a GIF here.

export const HEADER_BYTES = 16;

const PNG = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
const JPEG = [0xff, 0xd8, 0xff];
const ascii = (head, at, text) => [...text].every((c, i) => head[at + i] === c.charCodeAt(0));
const startsWith = (head, signature) => signature.every((byte, i) => head[i] === byte);

// head: the file's first HEADER_BYTES bytes. Returns the MIME type, or "" for any other file.
export function imageType(head) {
  if (startsWith(head, JPEG)) return "image/jpeg";
  if (startsWith(head, PNG)) return "image/png";
  if (
    ascii(head, 0, "RIFF") &&
    ascii(head, 8, "WEBP") &&
    ["VP8 ", "VP8L", "VP8X"].some((chunk) => ascii(head, 12, chunk))
  ) {
    return "image/webp";
  }
  return "";
}

export const ACCEPTED_TYPES = new Set(["image/jpeg", "image/png", "image/webp"]);
