// The palette demo on /showcases/workers/: one photo, three lanes (main thread, Web Worker,
// server), and an indicator drawn by requestAnimationFrame that stops whenever the main
// thread is busy. The work itself lives in image-analysis.js, shared by both browser lanes.
import { analyseImage } from "./image-analysis.js";

const demo = document.getElementById("palette-demo");
const text = JSON.parse(document.getElementById("palette-demo-messages").textContent);
const format = (template, values) =>
  template.replace(/\{(\w+)\}/g, (match, key) => (key in values ? String(values[key]) : match));
const $ = (selector, root = demo) => root.querySelector(selector);

const SLOW_FRAME_MS = 32;
const reducedMotion = window.matchMedia("(prefers-reduced-motion: reduce)");

const state = {
  file: null, // the chosen File; bytes are read afresh for every run
  busy: false,
  results: {}, // lane -> { longestFrame }
};

// --- The indicator -------------------------------------------------------------------------
// A dot that travels while frames are drawn, and a frame counter for those who asked for less
// motion: both stand still while the main thread is blocked.
const pulse = $("[data-pulse]");
const frames = $("[data-frames]");
let travel = 0;
const measureTravel = () => {
  travel = pulse.parentElement.clientWidth - pulse.offsetWidth - 24;
};
new ResizeObserver(measureTravel).observe(pulse.parentElement);
let frameCount = 0;
let lastFrame = performance.now();
let longestFrame = 0;

function onFrame() {
  const now = performance.now();
  const gap = now - lastFrame;
  lastFrame = now;
  longestFrame = Math.max(longestFrame, gap);
  frameCount += 1;
  frames.textContent = String(frameCount);
  if (!reducedMotion.matches) {
    const phase = (now / 1200) % 2;
    const position = phase < 1 ? phase : 2 - phase;
    pulse.style.transform = `translateX(${(position * travel).toFixed(1)}px)`;
  }
  requestAnimationFrame(onFrame);
}
requestAnimationFrame(onFrame);

// Measure the longest gap between frames while work runs, the way a visitor feels it. A
// stall that ends with the work is counted when the work returns (the time since the last
// frame), because the frame that follows it may be dispatched after this code resumes.
const nextFrame = () => new Promise((resolve) => requestAnimationFrame(resolve));

async function measured(work) {
  await nextFrame();
  longestFrame = 0;
  lastFrame = performance.now();
  const result = await work();
  const stalledUntilNow = performance.now() - lastFrame;
  await nextFrame();
  await nextFrame();
  return { result, longestFrame: Math.max(longestFrame, stalledUntilNow) };
}

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

// --- The worker: created once, reused, and replaced if it breaks ---------------------------
let worker = null;
let nextId = 1;
const pending = new Map(); // id -> { resolve, reject, timer }

function failAll(message) {
  for (const { reject, timer } of pending.values()) {
    clearTimeout(timer);
    reject(new Error(message));
  }
  pending.clear();
}

function getWorker() {
  if (worker) return worker;
  worker = new Worker(demo.dataset.workerUrl, { type: "module" });
  worker.addEventListener("message", (event) => {
    const { id, ok, result, error } = event.data;
    const waiting = pending.get(id);
    if (!waiting) return;
    pending.delete(id);
    clearTimeout(waiting.timer);
    if (ok) waiting.resolve(result);
    else waiting.reject(new Error(error));
  });
  // A script that fails to load or throws at the top level: nothing will ever answer.
  worker.addEventListener("error", (event) => {
    event.preventDefault();
    discardWorker(event.message || "the worker script could not run");
  });
  worker.addEventListener("messageerror", () => discardWorker("a message could not be read"));
  return worker;
}

function discardWorker(reason) {
  if (worker) worker.terminate();
  worker = null;
  failAll(reason);
}

function inWorker(bytes, options) {
  const timeoutMs = Number(demo.dataset.workerTimeoutMs);
  return new Promise((resolve, reject) => {
    const id = nextId++;
    const timer = setTimeout(() => {
      pending.delete(id);
      discardWorker(format(text.workerTimeout, { seconds: timeoutMs / 1000 }));
      reject(new Error(format(text.workerTimeout, { seconds: timeoutMs / 1000 })));
    }, timeoutMs);
    pending.set(id, { resolve, reject, timer });
    // The transfer list moves the buffer to the worker instead of copying it.
    getWorker().postMessage({ id, bytes, ...options }, [bytes]);
  });
}

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
      const answer = inWorker(bytes, { type: state.file.type, maxEdge: maxEdge() });
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
