// The palette demo's failures: the error line above the stage, and the page's sentence for
// each way a lane or a choice can fail.
import * as numbers from "./numbers.js";
import { format } from "./sentences.js";
import { WorkerFailure } from "./worker-client.js";

// The server lane's ways of failing: "network" (no answer), "offline" (no network at all),
// "status" (an answer that is not the server's JSON, e.g. a proxy's error page), "tooLarge" (a
// 413 not from the app itself: the upload was over a proxy's limit), "tooMany" (nginx's 429,
// its rate limit) and "refused" (the server's own, translated message).
export class ServerFailure extends Error {
  constructor(kind, { message = "", detail = "", status = 0 } = {}) {
    super(message || kind);
    this.name = "ServerFailure";
    this.kind = kind;
    this.detail = detail;
    this.status = status;
  }
}

// The one error line (role=alert). detail: the browser's or the server's own words, English
// whatever the page's language: kept out of the sentence, logged and left in a tooltip for
// whoever wants them.
export class ErrorLine {
  constructor(box) {
    this.box = box;
  }

  show(message, { detail = "", cause = null } = {}) {
    this.box.textContent = message;
    this.box.hidden = !message;
    if (detail) this.box.title = detail;
    else this.box.removeAttribute("title");
    if (cause) console.error(cause);
  }

  clear() {
    this.show("");
  }
}

// The page's sentence for a lane's failure; the names are the DOMException and Error names the
// browser's decoders, canvases and file readers throw. text: the page's sentences
// (script_words.palette_demo); maxBytes: the server lane's upload limit.
export function explain(lane, error, { text, maxBytes }) {
  if (error instanceof WorkerFailure) {
    if (error.kind === "timeout") {
      return format(text.workerTimeout, { seconds: numbers.seconds(error.timeoutMs / 1000) });
    }
    return error.kind === "load" ? text.workerLoad : text.workerMessage;
  }
  if (error instanceof ServerFailure) {
    if (error.kind === "refused") return error.message;
    if (error.kind === "offline") return text.serverOffline;
    if (error.kind === "tooLarge") {
      return format(text.serverTooLarge, { limit: numbers.fileSize(maxBytes) });
    }
    if (error.kind === "tooMany") return text.serverTooMany;
    if (error.kind === "network") return text.serverUnreachable;
    return format(text.serverStatus, { status: error.status });
  }
  switch (error?.name) {
    case "InvalidStateError":
    case "EncodingError":
    case "NotSupportedError":
      return text.decodeFailed;
    case "NotReadableError":
    case "NotFoundError":
      return text.unreadable;
    case "RangeError":
    case "QuotaExceededError":
      return text.outOfMemory;
    default:
      return { main: text.mainFailed, worker: text.workerFailed, server: text.serverFailed }[lane];
  }
}
