// The palette demo on /showcases/workers/: one photo, three lanes (main thread, Web Worker,
// server), each showing what the work cost and how smooth the page stayed. This module wires
// the page together; the work lives in image-analysis.js (shared by both browser lanes), the
// smoothness in frame-meter.js, and the worker's side of the conversation in
// worker-client.js.
import { AnalysisWorker } from "./worker-client.js";
import { measured, startIndicator } from "./frame-meter.js";
import { analyseImage } from "./image-analysis.js";

const demo = document.getElementById("palette-demo");
const text = JSON.parse(document.getElementById("palette-demo-messages").textContent);
const format = (template, values) =>
  template.replace(/\{(\w+)\}/g, (match, key) => (key in values ? String(values[key]) : match));
const $ = (selector, root = demo) => root.querySelector(selector);

const SLOW_FRAME_MS = 32;

const state = {
  file: null, // the chosen File; bytes are read afresh for every run
  busy: false,
  results: {}, // lane -> { longestFrame }
};

startIndicator({ pulse: $("[data-pulse]"), frames: $("[data-frames]") });

// --- Choosing a photo ----------------------------------------------------------------------
const errorBox = $("[data-error]");
const showError = (message) => {
  errorBox.textContent = message;
  errorBox.hidden = !message;
};

function setBusy(busy) {
  state.busy = busy;
  for (const button of demo.querySelectorAll("[data-run]")) {
    button.disabled = busy || !state.file;
  }
}

function choose(file) {
  showError("");
  if (!file || !file.type.startsWith("image/")) {
    showError(text.notImage);
    return;
  }
  state.file = file;
  state.results = {};
  $("[data-verdict]").textContent = "";
  const image = $("[data-preview-image]");
  if (image.src) URL.revokeObjectURL(image.src);
  image.src = URL.createObjectURL(file);
  image.onload = () => {
    $("[data-preview-caption]").textContent = format(text.caption, {
      width: image.naturalWidth,
      height: image.naturalHeight,
      size: (file.size / 1048576).toFixed(1),
    });
  };
  $("[data-preview]").hidden = false;
  for (const lane of demo.querySelectorAll("[data-lane]")) clearLane(lane);
  setBusy(false);
}

$("#demo-file").addEventListener("change", (event) => choose(event.target.files[0]));
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
$("[data-sample]").addEventListener("click", async () => {
  const response = await fetch(demo.dataset.sampleUrl);
  const blob = await response.blob();
  choose(new File([blob], "sample.jpg", { type: blob.type || "image/jpeg" }));
});

const maxEdge = () => Number(demo.querySelector("input[name=work-size]:checked").value);

// Read from the page at each use, so a test can point them elsewhere.
const analysisWorker = new AnalysisWorker({
  url: () => demo.dataset.workerUrl,
  timeoutMs: () => Number(demo.dataset.workerTimeoutMs),
  timeoutMessage: (seconds) => format(text.workerTimeout, { seconds }),
});

// --- Lanes ---------------------------------------------------------------------------------
const ms = (value) => format(text.ms, { value: value.toFixed(value < 10 ? 1 : 0) });

function clearLane(lane) {
  for (const dd of lane.querySelectorAll("[data-stat]")) {
    dd.textContent = "—";
    dd.classList.remove("slow");
  }
  $("[data-palette]", lane).replaceChildren();
}

function showLane(name, { result, longestFrame: frame, extra = {} }) {
  const lane = demo.querySelector(`[data-lane="${name}"]`);
  const set = (stat, value) => {
    const dd = lane.querySelector(`[data-stat="${stat}"]`);
    if (dd) dd.textContent = value;
    return dd;
  };
  set("decode", ms(result.decodeMs));
  set("analysis", ms(result.analysisMs));
  set("work", ms(result.decodeMs + result.analysisMs));
  set("frame", ms(frame)).classList.toggle("slow", frame > SLOW_FRAME_MS);
  for (const [stat, value] of Object.entries(extra)) set(stat, value);
  const bar = $("[data-palette]", lane);
  bar.replaceChildren(
    ...result.swatches.map((swatch) => {
      const segment = document.createElement("span");
      segment.className = "swatch";
      segment.style.width = `${(swatch.share * 100).toFixed(3)}%`;
      segment.style.backgroundColor = swatch.hex;
      segment.title = format(text.swatch, {
        hex: swatch.hex,
        percent: (swatch.share * 100).toFixed(1),
      });
      segment.dataset.hex = swatch.hex;
      return segment;
    }),
  );
  lane.dataset.done = "true";
  state.results[name] = { longestFrame: frame, swatches: result.swatches };
  verdict();
}

function verdict() {
  const { main, worker: inWorkerLane } = state.results;
  if (!main || !inWorkerLane) return;
  const values = {
    main: Math.round(main.longestFrame),
    worker: Math.round(inWorkerLane.longestFrame),
  };
  $("[data-verdict]").textContent = format(
    main.longestFrame > 2 * SLOW_FRAME_MS ? text.verdict : text.verdictSmall,
    values,
  );
}

const runners = {
  async main() {
    const bytes = await state.file.arrayBuffer();
    return measured(() => analyseImage(bytes, { type: state.file.type, maxEdge: maxEdge() }));
  },
  async worker() {
    // Read the bytes afresh: the transfer empties this buffer for good.
    const bytes = await state.file.arrayBuffer();
    let afterPost = null;
    const outcome = await measured(() => {
      const answer = analysisWorker.analyse(bytes, { type: state.file.type, maxEdge: maxEdge() });
      afterPost = bytes.byteLength;
      return answer;
    });
    outcome.extra = { transfer: format(text.bytes, { value: afterPost }) };
    demo.dataset.transferredBytes = String(afterPost);
    return outcome;
  },
  async server() {
    const body = new FormData();
    body.append("image", state.file);
    const started = performance.now();
    const outcome = await measured(async () => {
      const response = await fetch(demo.dataset.serverUrl, {
        method: "POST",
        body,
        headers: { "X-CSRFToken": $("input[name=csrfmiddlewaretoken]").value },
      });
      const data = await response.json().catch(() => ({ error: response.statusText }));
      if (!response.ok) throw new Error(data.error || response.statusText);
      return data;
    });
    outcome.extra = { roundtrip: ms(performance.now() - started) };
    return outcome;
  },
};

const failures = { main: text.decodeFailed, worker: text.workerFailed, server: text.serverFailed };

for (const button of demo.querySelectorAll("[data-run]")) {
  button.addEventListener("click", async () => {
    if (state.busy || !state.file) return;
    const lane = button.dataset.run;
    showError("");
    setBusy(true);
    try {
      showLane(lane, await runners[lane]());
    } catch (error) {
      showError(format(failures[lane], { error: error.message }));
    } finally {
      setBusy(false);
    }
  });
}

demo.dataset.ready = "true";
