// Choosing a photo: the file picker, the drop zone and the sample; the check that every lane
// can read the choice; and the preview that shows it.
import { ACCEPTED_TYPES, HEADER_BYTES, imageType } from "./image-format.js";
import * as numbers from "./numbers.js";
import { format } from "./sentences.js";
import { WorkerFailure } from "./worker-client.js";

// The preview's largest box in CSS pixels (the stylesheet's max-height: 16rem), times the
// screen's pixel density so it stays sharp.
const PREVIEW_BOX = { width: 640, height: 256 };

// The figure above the lanes: a sentence while a photo is fetched or read, then its picture
// and its size.
export class Preview {
  constructor(figure) {
    this.figure = figure;
    this.canvas = figure.querySelector("[data-preview-image]");
    this.status = figure.querySelector("[data-preview-status]");
    this.caption = figure.querySelector("[data-preview-caption]");
  }

  pending(message) {
    this.figure.hidden = false;
    this.figure.setAttribute("aria-busy", "true");
    this.status.textContent = message;
    this.status.hidden = false;
  }

  clear() {
    // Hands the canvas's bitmap back, so a large preview's memory goes with the photo.
    this.canvas.getContext("bitmaprenderer").transferFromImageBitmap(null);
    this.canvas.hidden = true;
    this.status.textContent = "";
    this.status.hidden = true;
    this.figure.removeAttribute("aria-busy");
    this.caption.textContent = "";
    this.figure.hidden = true;
  }

  // bitmap: the small copy inspect() made, or null when there is no picture to show.
  show(bitmap, caption) {
    this.status.textContent = "";
    this.status.hidden = true;
    this.figure.removeAttribute("aria-busy");
    if (bitmap) {
      this.canvas.width = bitmap.width;
      this.canvas.height = bitmap.height;
      this.canvas.style.width = `${bitmap.width / (window.devicePixelRatio || 1)}px`;
      this.canvas.getContext("bitmaprenderer").transferFromImageBitmap(bitmap);
      this.canvas.hidden = false;
    }
    this.caption.textContent = caption;
  }
}

// The photo's size and a preview small enough to draw at once. A worker of its own
// (inspector, an AnalysisWorker) decodes it (a 9000 × 9000 PNG takes seconds) and is ended
// with the look, so the page never waits and the worker lane's worker still starts cold.
// Without workers, the browser decodes the photo off this thread all the same, and there is
// no picture.
async function look(file, inspector) {
  const density = window.devicePixelRatio || 1;
  try {
    return await inspector.preview(file, {
      maxWidth: Math.round(PREVIEW_BOX.width * density),
      maxHeight: Math.round(PREVIEW_BOX.height * density),
    });
  } catch (error) {
    if (!(error instanceof WorkerFailure) || error.kind === "closed") throw error;
    const bitmap = await createImageBitmap(file);
    const { width, height } = bitmap;
    bitmap.close();
    return { width, height, bitmap: null };
  } finally {
    inspector.close();
  }
}

// Decide, once, whether every lane can read the file: its bytes name one of the three formats
// (the server lane reads no others), and the browser decodes it. Returns { type, width, height,
// bitmap } or { error, cause }.
export async function inspect(file, { inspector, text }) {
  if (file.size === 0) return { error: text.empty };
  let head;
  try {
    head = new Uint8Array(await file.slice(0, HEADER_BYTES).arrayBuffer());
  } catch (error) {
    return { error: text.unreadable, cause: error };
  }
  const type = imageType(head);
  let seen = null;
  let cause = null;
  try {
    seen = await look(file, inspector);
  } catch (error) {
    cause = error;
  }
  if (seen && type) return { type, ...seen };
  seen?.bitmap?.close();
  if (type) return { error: text.undecodable, cause };
  // Decoded, or named, as an image of another kind (GIF, AVIF, BMP, HEIC…).
  const otherImage = seen || (file.type.startsWith("image/") && !ACCEPTED_TYPES.has(file.type));
  return { error: otherImage ? text.unsupported : text.notImage, cause };
}

// Why the server lane would refuse this photo, checked against its own limits
// (showcases/analysis.py: { bytes, pixels }); "" if it would not.
export function serverObjection(file, { width, height }, { limits, text }) {
  if (file.size > limits.bytes) {
    return format(text.serverFileTooLarge, {
      size: numbers.fileSize(file.size),
      limit: numbers.fileSize(limits.bytes),
    });
  }
  if (width * height > limits.pixels) {
    return format(text.serverTooManyPixels, {
      megapixels: numbers.megapixels(width * height),
      limit: numbers.megapixels(limits.pixels),
    });
  }
  return "";
}

// The sample photo as a File, like one the visitor chose.
export async function fetchSample(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
  const blob = await response.blob();
  return new File([blob], "sample.jpg", { type: blob.type || "image/jpeg" });
}

// Calls choose(file) with whatever is dropped on the zone (undefined for no file).
export function acceptDrops(dropzone, choose) {
  dropzone.addEventListener("dragover", (event) => {
    event.preventDefault();
    dropzone.classList.add("dragging");
  });
  dropzone.addEventListener("dragleave", () => dropzone.classList.remove("dragging"));
  dropzone.addEventListener("drop", (event) => {
    event.preventDefault();
    dropzone.classList.remove("dragging");
    choose(event.dataTransfer.files[0]);
  });
}
