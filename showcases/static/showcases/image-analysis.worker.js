// Worker shell: message plumbing only; the work lives in image-analysis.js.
import { analyseImage } from "./image-analysis.js";

self.addEventListener("message", async (event) => {
  const { id, bytes, type, maxEdge } = event.data;
  try {
    const result = await analyseImage(bytes, { type, maxEdge });
    self.postMessage({ id, ok: true, result });
  } catch (error) {
    self.postMessage({ id, ok: false, error: String(error?.message ?? error) });
  }
});
