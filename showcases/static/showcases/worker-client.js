// The page's side of the Web Worker (image-analysis.worker.js): one worker, created when first
// needed and reused, each request matched to its answer by id. A worker that fails to load,
// throws at its top level, or does not answer in time is discarded (every request waiting on
// it fails with a WorkerFailure saying which) and the next request starts a fresh one: a broken
// worker surfaces as an error, never a hang.

// Why the worker gave no answer. kind: "load" (the script did not load or threw at its top
// level), "timeout" (no answer within timeoutMs), "message" (an answer could not be read) or
// "closed" (the page ended the worker, having no more use for its answer).
// The message is the browser's own words, for the console: the page says it in its language.
export class WorkerFailure extends Error {
  constructor(kind, message, { timeoutMs = 0 } = {}) {
    super(message || kind);
    this.name = "WorkerFailure";
    this.kind = kind;
    this.timeoutMs = timeoutMs;
  }
}

export class AnalysisWorker {
  // url(): the worker script's URL; timeoutMs(): how long an answer may take.
  constructor({ url, timeoutMs }) {
    this.url = url;
    this.timeoutMs = timeoutMs;
    this.worker = null;
    this.nextId = 1;
    this.pending = new Map(); // id -> { resolve, reject, timer }
  }

  // bytes: an ArrayBuffer, transferred (the caller's copy becomes 0 bytes long). A failure
  // inside the work rejects with an Error of the worker's error name (InvalidStateError, …).
  analyse(bytes, options) {
    // The transfer list moves the buffer to the worker instead of copying it.
    return this.request({ bytes, ...options }, [bytes]);
  }

  // The photo's { width, height } and a small ImageBitmap of it (moved here, not copied), no
  // larger than maxWidth × maxHeight.
  preview(blob, { maxWidth, maxHeight }) {
    return this.request({ kind: "preview", blob, maxWidth, maxHeight }, []);
  }

  // Ends the worker and whatever it was doing; the next request starts a fresh one.
  close() {
    this.discard(new WorkerFailure("closed", "the worker was closed"));
  }

  request(message, transfer) {
    const timeoutMs = this.timeoutMs();
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      const timer = setTimeout(() => {
        this.pending.delete(id);
        const failure = new WorkerFailure("timeout", `no answer within ${timeoutMs} ms`, {
          timeoutMs,
        });
        this.discard(failure);
        reject(failure);
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      this.running().postMessage({ id, ...message }, transfer);
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
      else waiting.reject(Object.assign(new Error(error.message), { name: error.name }));
    });
    // A script that fails to load or throws at the top level: nothing will ever answer.
    this.worker.addEventListener("error", (event) => {
      event.preventDefault();
      this.discard(new WorkerFailure("load", event.message || "the worker script could not run"));
    });
    this.worker.addEventListener("messageerror", () =>
      this.discard(new WorkerFailure("message", "a message could not be read")),
    );
    return this.worker;
  }

  discard(failure) {
    if (this.worker) this.worker.terminate();
    this.worker = null;
    for (const { reject, timer } of this.pending.values()) {
      clearTimeout(timer);
      reject(failure);
    }
    this.pending.clear();
  }
}
