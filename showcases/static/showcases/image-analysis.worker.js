// Worker shell: message plumbing only; the work lives in image-analysis.js.
import { analyseImage, previewImage } from "./image-analysis.js";

self.addEventListener("message", async (event) => {
  const { id, kind, bytes, blob, type, maxEdge, maxWidth, maxHeight } = event.data;
  try {
    if (kind === "preview") {
      const result = await previewImage(blob, { maxWidth, maxHeight });
      // The small bitmap is moved to the page, not copied.
      self.postMessage({ id, ok: true, result }, [result.bitmap]);
      return;
    }
    // result carries the worker's own timings (decode, read-back, palette): its performance
    // entries are on its own timeline, which the page cannot read.
    const result = await analyseImage(bytes, { type, maxEdge });
    self.postMessage({ id, ok: true, result });
  } catch (error) {
    // The name (InvalidStateError, RangeError, …) is what the page maps to its own sentence;
    // an Error itself may not survive the trip to the page intact.
    const name = String(error?.name ?? "Error");
    self.postMessage({ id, ok: false, error: { name, message: String(error?.message ?? error) } });
  }
});
