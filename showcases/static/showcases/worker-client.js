// The page's side of the Web Worker (image-analysis.worker.js): one worker, created when first
// needed and reused, each request matched to its answer by id. A worker that fails to load,
// throws at its top level, or does not answer in time is discarded (every request waiting on
// it fails with the reason) and the next request starts a fresh one: a broken worker surfaces
// as an error, never a hang.

export class AnalysisWorker {
  // url(): the worker script's URL; timeoutMs(): how long an answer may take;
  // timeoutMessage(seconds): the error a request that timed out fails with.
  constructor({ url, timeoutMs, timeoutMessage }) {
    this.url = url;
    this.timeoutMs = timeoutMs;
    this.timeoutMessage = timeoutMessage;
    this.worker = null;
    this.nextId = 1;
    this.pending = new Map(); // id -> { resolve, reject, timer }
  }

  // bytes: an ArrayBuffer, transferred (the caller's copy becomes 0 bytes long).
  analyse(bytes, options) {
    const timeoutMs = this.timeoutMs();
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      const timer = setTimeout(() => {
        const message = this.timeoutMessage(timeoutMs / 1000);
        this.pending.delete(id);
        this.discard(message);
        reject(new Error(message));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      // The transfer list moves the buffer to the worker instead of copying it.
      this.running().postMessage({ id, bytes, ...options }, [bytes]);
    });
  }

  running() {
    if (this.worker) return this.worker;
    this.worker = new Worker(this.url(), { type: "module" });
    this.worker.addEventListener("message", (event) => {
      const { id, ok, result, error } = event.data;
      const waiting = this.pending.get(id);
      if (!waiting) return;
      this.pending.delete(id);
      clearTimeout(waiting.timer);
      if (ok) waiting.resolve(result);
      else waiting.reject(new Error(error));
    });
    // A script that fails to load or throws at the top level: nothing will ever answer.
    this.worker.addEventListener("error", (event) => {
      event.preventDefault();
      this.discard(event.message || "the worker script could not run");
    });
    this.worker.addEventListener("messageerror", () => this.discard("a message could not be read"));
    return this.worker;
  }

  discard(reason) {
    if (this.worker) this.worker.terminate();
    this.worker = null;
    for (const { reject, timer } of this.pending.values()) {
      clearTimeout(timer);
      reject(new Error(reason));
    }
    this.pending.clear();
  }
}
