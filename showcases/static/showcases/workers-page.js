// The palette demo on /showcases/workers/: one photo, three lanes (main thread, Web Worker,
// server), each showing what the work cost and how smooth the page stayed. This module wires
// the page together; the work lives in image-analysis.js (shared by both browser lanes), the
// smoothness in frame-meter.js, the worker's side of the conversation in worker-client.js and
// the numbers' look in numbers.js. Every sentence comes from the page (views._demo_messages).
import { AnalysisWorker, WorkerFailure } from "./worker-client.js";
import { measured, startIndicator } from "./frame-meter.js";
import { analyseImage } from "./image-analysis.js";
import { ACCEPTED_TYPES, HEADER_BYTES, imageType } from "./image-format.js";
import * as numbers from "./numbers.js";

const demo = document.getElementById("palette-demo");
const text = JSON.parse(document.getElementById("palette-demo-messages").textContent);
const format = (template, values) =>
  template.replace(/\{(\w+)\}/g, (match, key) => (key in values ? String(values[key]) : match));
const $ = (selector, root = demo) => root.querySelector(selector);
const laneOf = (name) => $(`[data-lane="${name}"]`);

// A frame longer than two at 60 Hz is a stutter a visitor sees: marked red, and the verdict's
// line between "stalled" and "kept moving".
const SLOW_FRAME_MS = 32;

const state = {
  file: null, // the chosen File, once it has passed inspect(); bytes are read afresh each run
  type: "", // its type by its bytes (image-format.js), which every lane is told
  // Bumped by every choice: an inspection or a run that finishes after the visitor chose
  // another photo belongs to the old one and is dropped.
  generation: 0,
  busy: false,
  results: {}, // lane -> { longestFrame, maxEdge }
  inspector: null, // the worker reading the chosen photo, until it has
  serverRefusal: "", // why the server lane cannot take this photo, if it cannot
};

const frameCounter = $("[data-frames]");
startIndicator({
  pulse: $("[data-pulse]"),
  showFrames(count) {
    frameCounter.dataset.count = String(count);
    frameCounter.textContent = format(numbers.plural(text.framesDrawn, count), {
      count: numbers.count(count),
    });
  },
});

// Two frames: the first callback runs before the next paint, the second after it, so whatever
// the page changed before this is on screen when it resolves.
const nextFrame = () => new Promise((resolve) => requestAnimationFrame(resolve));
const painted = async () => {
  await nextFrame();
  await nextFrame();
};

// --- Errors --------------------------------------------------------------------------------
const errorBox = $("[data-error]");

// detail: the browser's or the server's own words, English whatever the page's language:
// kept out of the sentence, logged and left in a tooltip for whoever wants them.
function showError(message, { detail = "", cause = null } = {}) {
  errorBox.textContent = message;
  errorBox.hidden = !message;
  if (detail) errorBox.title = detail;
  else errorBox.removeAttribute("title");
  if (cause) console.error(cause);
}

// The server lane's ways of failing: "network" (no answer), "status" (an answer that is not
// the server's JSON, e.g. a proxy's error page), "tooLarge" (a 413 not from the app itself:
// the upload was over a proxy's limit) and "refused" (the server's own, translated message).
class ServerFailure extends Error {
  constructor(kind, { message = "", detail = "", status = 0 } = {}) {
    super(message || kind);
    this.name = "ServerFailure";
    this.kind = kind;
    this.detail = detail;
    this.status = status;
  }
}

const laneFailed = { main: text.mainFailed, worker: text.workerFailed, server: text.serverFailed };

// The page's sentence for a lane's failure; the names are the DOMException and Error names the
// browser's decoders, canvases and file readers throw.
function explain(lane, error) {
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
      return format(text.serverTooLarge, { limit: numbers.fileSize(serverLimits.bytes) });
    }
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
      return laneFailed[lane];
  }
}

// --- Choosing a photo ----------------------------------------------------------------------
const fileInput = $("#demo-file");
const preview = $("[data-preview]");
const previewCanvas = $("[data-preview-image]");
const previewStatus = $("[data-preview-status]");
const caption = $("[data-preview-caption]");
const serverButton = $("[data-run=server]");
const serverRefusal = $("[data-server-refusal]");
// The server lane's own limits (showcases/analysis.py), so a file it would refuse is refused
// here, before a byte is uploaded, with the limit in the page's language.
const serverLimits = {
  bytes: Number(demo.dataset.serverMaxBytes),
  pixels: Number(demo.dataset.serverMaxPixels),
};
// The preview's largest box in CSS pixels (the stylesheet's max-height: 16rem), times the
// screen's pixel density so it stays sharp.
const PREVIEW_BOX = { width: 640, height: 256 };

function updateButtons() {
  for (const button of demo.querySelectorAll("[data-run]")) {
    button.disabled = state.busy || !state.file;
  }
  if (state.serverRefusal) serverButton.disabled = true;
}

// The server lane cannot take every file the browser lanes can: say why next to its button.
function refuseServer(message) {
  state.serverRefusal = message;
  serverRefusal.textContent = message;
  serverRefusal.hidden = !message;
  updateButtons();
}

// What the figure shows while a photo is fetched or read: a sentence, at once.
function showPending(message) {
  preview.hidden = false;
  preview.setAttribute("aria-busy", "true");
  previewStatus.textContent = message;
  previewStatus.hidden = false;
}

function clearPreview() {
  // Hands the canvas's bitmap back, so a large preview's memory goes with the photo.
  previewCanvas.getContext("bitmaprenderer").transferFromImageBitmap(null);
  previewCanvas.hidden = true;
  previewStatus.textContent = "";
  previewStatus.hidden = true;
  preview.removeAttribute("aria-busy");
  caption.textContent = "";
  preview.hidden = true;
}

function showPreview(bitmap) {
  previewCanvas.width = bitmap.width;
  previewCanvas.height = bitmap.height;
  previewCanvas.style.width = `${bitmap.width / (window.devicePixelRatio || 1)}px`;
  previewCanvas.getContext("bitmaprenderer").transferFromImageBitmap(bitmap);
  previewCanvas.hidden = false;
}

// Everything the page knew about the previous photo goes, before the next one is looked at.
function forget() {
  state.generation += 1;
  state.inspector?.close();
  state.inspector = null;
  state.file = null;
  state.type = "";
  state.results = {};
  showError("");
  clearPreview();
  refuseServer("");
  $("[data-verdict]").textContent = "";
  for (const lane of demo.querySelectorAll("[data-lane]")) clearLane(lane);
  updateButtons();
}

// The photo's size and a preview small enough to draw at once. A worker of its own decodes
// it (a 9000 × 9000 PNG takes seconds) and is ended with the choice, so the page never waits
// and the worker lane's worker still starts cold. Without workers, the browser decodes the
// photo off this thread all the same, and there is no picture.
async function look(file) {
  const inspector = new AnalysisWorker({
    url: () => demo.dataset.workerUrl,
    timeoutMs: () => Number(demo.dataset.workerTimeoutMs),
  });
  state.inspector = inspector;
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
// bitmap } or { error }.
async function inspect(file) {
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
    seen = await look(file);
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

// Why the server lane would refuse this photo, checked against its own limits; "" if it would not.
function serverObjection(file, { width, height }) {
  if (file.size > serverLimits.bytes) {
    return format(text.serverFileTooLarge, {
      size: numbers.fileSize(file.size),
      limit: numbers.fileSize(serverLimits.bytes),
    });
  }
  if (width * height > serverLimits.pixels) {
    return format(text.serverTooManyPixels, {
      megapixels: numbers.megapixels(width * height),
      limit: numbers.megapixels(serverLimits.pixels),
    });
  }
  return "";
}

async function choose(file) {
  forget();
  const generation = state.generation;
  if (!file) {
    showError(text.notImage);
    return;
  }
  showPending(text.reading);
  const found = await inspect(file);
  if (generation !== state.generation) {
    found.bitmap?.close();
    return;
  }
  if (found.error) {
    clearPreview();
    showError(found.error, { detail: found.cause?.message, cause: found.cause });
    // Choosing the same file again (once fixed) must fire "change" again.
    fileInput.value = "";
    return;
  }
  state.file = file;
  state.type = found.type;
  previewStatus.textContent = "";
  previewStatus.hidden = true;
  preview.removeAttribute("aria-busy");
  if (found.bitmap) showPreview(found.bitmap);
  caption.textContent = format(text.caption, {
    width: numbers.pixels(found.width),
    height: numbers.pixels(found.height),
    size: numbers.fileSize(file.size),
  });
  refuseServer(serverObjection(file, found));
  updateButtons();
}

fileInput.addEventListener("change", (event) => choose(event.target.files[0]));
const dropzone = $("[data-dropzone]");
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
// The sample is a choice like any other, made when clicked: a photo chosen while it downloads
// wins, and the sample, arriving late, is dropped.
$("[data-sample]").addEventListener("click", async () => {
  forget();
  const generation = state.generation;
  showPending(text.loadingSample);
  let blob;
  try {
    const response = await fetch(demo.dataset.sampleUrl);
    if (!response.ok) throw new Error(`${response.status} ${response.statusText}`);
    blob = await response.blob();
  } catch (error) {
    if (generation !== state.generation) return;
    clearPreview();
    showError(text.sampleFailed, { detail: error.message, cause: error });
    return;
  }
  if (generation !== state.generation) return;
  choose(new File([blob], "sample.jpg", { type: blob.type || "image/jpeg" }));
});

// --- Work size -----------------------------------------------------------------------------
const maxEdge = () => Number($("input[name=work-size]:checked").value);
const fullResolutionNote = $("[data-full-resolution-note]");
const showWorkSize = () => {
  fullResolutionNote.hidden = maxEdge() !== 0;
};
for (const radio of demo.querySelectorAll("input[name=work-size]")) {
  radio.addEventListener("change", showWorkSize);
}
showWorkSize();

// Read from the page at each use, so a test can point them elsewhere.
const analysisWorker = new AnalysisWorker({
  url: () => demo.dataset.workerUrl,
  timeoutMs: () => Number(demo.dataset.workerTimeoutMs),
});

// --- Lanes ---------------------------------------------------------------------------------
function clearLane(lane) {
  for (const dd of lane.querySelectorAll("[data-stat]")) {
    dd.textContent = "—";
    dd.classList.remove("slow");
    delete dd.dataset.value;
  }
  $("[data-palette]", lane).replaceChildren();
  $("[data-legend]", lane).replaceChildren();
  $("[data-transparent]", lane).hidden = true;
  const firstCall = $("[data-first-call-note]", lane);
  if (firstCall) firstCall.hidden = true;
  lane.dataset.done = "false";
}

function startLane(name) {
  const lane = laneOf(name);
  clearLane(lane);
  delete state.results[name];
  verdict();
  lane.setAttribute("aria-busy", "true");
  $("[data-status]", lane).textContent = text.working[name];
}

function endLane(name) {
  const lane = laneOf(name);
  lane.removeAttribute("aria-busy");
  $("[data-status]", lane).textContent = "";
}

function swatchSegment({ hex, share }) {
  const segment = document.createElement("span");
  segment.className = "swatch";
  segment.style.width = `${(share * 100).toFixed(3)}%`;
  segment.style.backgroundColor = hex;
  segment.title = format(text.swatch, { hex, percent: numbers.percent(share) });
  segment.dataset.hex = hex;
  return segment;
}

function legendItem(chipColour, ...content) {
  const item = document.createElement("li");
  const chip = document.createElement("span");
  chip.className = "chip";
  if (chipColour) chip.style.backgroundColor = chipColour;
  else chip.classList.add("chip-other");
  item.append(chip, ...content);
  return item;
}

// The bar shows each swatch's share; the grey left over is the pixels whose colour is near
// none of the six. The legend says both in words, so no one needs a tooltip to read them.
function showPalette(lane, swatches) {
  $("[data-palette]", lane).replaceChildren(...swatches.map(swatchSegment));
  const items = swatches.map((swatch) => {
    const code = document.createElement("code");
    code.textContent = swatch.hex;
    return legendItem(swatch.hex, code, " ", numbers.percent(swatch.share));
  });
  const rest = 1 - swatches.reduce((sum, swatch) => sum + swatch.share, 0);
  // Shares are divisions of whole counts: a remainder under half a per mille is rounding.
  if (rest >= 0.0005) {
    const other = legendItem(null, format(text.otherColours, { percent: numbers.percent(rest) }));
    other.dataset.other = "";
    items.push(other);
  }
  $("[data-legend]", lane).replaceChildren(...items);
}

// The palette counts only pixels at least half opaque: when a photo has others, say how many
// were left out, so the shares read as shares of the rest. Rounded as the shares are.
function showTransparent(lane, share = 0) {
  const note = $("[data-transparent]", lane);
  note.textContent = format(text.transparent, { percent: numbers.percent(share) });
  note.hidden = share < 0.0005;
}

function showLane(name, { result, longestFrame: frame, maxEdge: edge, extra = {} }) {
  const lane = laneOf(name);
  const set = (stat, shown, value) => {
    const dd = lane.querySelector(`[data-stat="${stat}"]`);
    dd.textContent = shown;
    if (value !== undefined) dd.dataset.value = String(value);
    return dd;
  };
  const time = (stat, value) => set(stat, numbers.milliseconds(value), value);
  time("decode", result.decodeMs);
  time("analysis", result.analysisMs);
  time("work", result.decodeMs + result.analysisMs);
  time("frame", frame).classList.toggle("slow", frame > SLOW_FRAME_MS);
  set(
    "size",
    format(text.pixels, {
      width: numbers.pixels(result.width),
      height: numbers.pixels(result.height),
    }),
  );
  for (const [stat, { shown, value }] of Object.entries(extra)) set(stat, shown, value);
  showPalette(lane, result.swatches);
  showTransparent(lane, result.transparent);
  lane.dataset.done = "true";
  state.results[name] = { longestFrame: frame, maxEdge: edge };
  verdict();
}

// One lane's longest frame is far longer than the other's when it is at least twice as long
// and at least one stutter (SLOW_FRAME_MS) longer: the ratio alone would part 40 ms from 17 ms,
// both a single brief hitch at most, and the difference alone 1,000 ms from 1,050 ms, two
// freezes a visitor cannot tell apart.
const FAR_RATIO = 2;
const farLonger = (long, short) => long >= FAR_RATIO * short && long - short >= SLOW_FRAME_MS;

// What the two browser lanes' longest frames show, compared with each other, and nothing more.
function verdict() {
  const box = $("[data-verdict]");
  const { main, worker } = state.results;
  if (!main || !worker) {
    box.textContent = "";
    return;
  }
  if (main.maxEdge !== worker.maxEdge) {
    box.textContent = text.verdictMixed;
    return;
  }
  const values = {
    main: numbers.milliseconds(main.longestFrame),
    worker: numbers.milliseconds(worker.longestFrame),
    limit: numbers.milliseconds(SLOW_FRAME_MS),
  };
  const mainSlow = main.longestFrame > SLOW_FRAME_MS;
  const workerSlow = worker.longestFrame > SLOW_FRAME_MS;
  let sentence;
  let suggest = false;
  if (!mainSlow && !workerSlow) {
    sentence = format(text.verdictNeither, values);
    suggest = true;
  } else if (farLonger(main.longestFrame, worker.longestFrame)) {
    if (workerSlow) {
      const ratio = Math.round(main.longestFrame / worker.longestFrame);
      const template = numbers.plural(text.verdictWorkerSmoother, ratio);
      sentence = format(template, { ...values, ratio: numbers.count(ratio) });
    } else sentence = format(text.verdictMainSlow, values);
  } else if (farLonger(worker.longestFrame, main.longestFrame)) {
    sentence = format(text.verdictWorkerSlow, values);
  } else if (mainSlow && workerSlow) {
    sentence = format(text.verdictBothSlow, values);
  } else {
    sentence = format(text.verdictClose, values);
    suggest = true;
  }
  if (suggest && main.maxEdge !== 0) sentence += ` ${text.tryFullResolution}`;
  box.textContent = sentence;
}

const runners = {
  async main(edge) {
    const bytes = await state.file.arrayBuffer();
    return measured(() => analyseImage(bytes, { type: state.type, maxEdge: edge }));
  },
  async worker(edge) {
    // Read the bytes afresh: the transfer empties this buffer for good.
    const bytes = await state.file.arrayBuffer();
    const before = bytes.byteLength;
    let afterPost = null;
    const outcome = await measured(() => {
      const answer = analysisWorker.analyse(bytes, { type: state.type, maxEdge: edge });
      afterPost = bytes.byteLength;
      return answer;
    });
    const shown = `${numbers.bytes(before)} → ${numbers.bytes(afterPost)}`;
    outcome.extra = { transfer: { shown, value: afterPost } };
    demo.dataset.transferredBytes = String(afterPost);
    return outcome;
  },
  // The server works at 720 px whatever the work size (analysis.MAX_EDGE).
  async server() {
    const body = new FormData();
    body.append("image", state.file);
    let roundTrip = 0;
    const outcome = await measured(async () => {
      // From sending to having read the answer: the upload, the server and the way back,
      // none of the frames measured() waits for around it.
      const started = performance.now();
      let response;
      try {
        response = await fetch(demo.dataset.serverUrl, {
          method: "POST",
          body,
          headers: { "X-CSRFToken": $("input[name=csrfmiddlewaretoken]").value },
        });
      } catch (error) {
        // Offline, the browser lanes still work (the service worker keeps their scripts);
        // this one cannot, and says so.
        const kind = navigator.onLine === false ? "offline" : "network";
        throw new ServerFailure(kind, { detail: error.message });
      }
      const data = await response.json().catch(() => null);
      roundTrip = performance.now() - started;
      // A 413 is the upload's size whoever answered: nginx's page (HTML, or JSON with a code of
      // its own, in English) is told as the page's sentence; the app's own refusal, translated
      // and giving its reason (pixels, memory), is shown as written.
      if (response.status === 413 && !(data?.error && !data.code)) {
        throw new ServerFailure("tooLarge", { status: 413, detail: response.statusText });
      }
      if (data === null || (!response.ok && !data.error)) {
        throw new ServerFailure("status", {
          status: response.status,
          detail: response.statusText,
        });
      }
      if (!response.ok) {
        throw new ServerFailure("refused", { message: data.error, detail: data.detail });
      }
      return data;
    });
    outcome.extra = { roundtrip: { shown: numbers.milliseconds(roundTrip), value: roundTrip } };
    $("[data-first-call-note]", laneOf("server")).hidden = !outcome.result.firstInProcess;
    return outcome;
  },
};

async function run(name) {
  if (state.busy || !state.file) return;
  const generation = state.generation;
  showError("");
  state.busy = true;
  updateButtons();
  startLane(name);
  try {
    // The status must be on screen before the main lane blocks the thread that paints it.
    await painted();
    const edge = maxEdge();
    const outcome = await runners[name](edge);
    if (generation === state.generation) showLane(name, { ...outcome, maxEdge: edge });
  } catch (error) {
    if (generation === state.generation) {
      showError(explain(name, error), { detail: error.detail || error.message, cause: error });
    }
  } finally {
    endLane(name);
    state.busy = false;
    updateButtons();
  }
}

for (const button of demo.querySelectorAll("[data-run]")) {
  button.addEventListener("click", () => run(button.dataset.run));
}

demo.dataset.ready = "true";
