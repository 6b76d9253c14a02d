// The palette demo on /showcases/workers/: one photo, three lanes (main thread, Web Worker,
// server), each showing what the work cost and how smooth the page stayed. This module wires
// the page's parts together: choosing.js (the photo and its preview), lanes.js (each lane's
// card and run), verdict.js (what the browser lanes' frames show) and errors.js (the error
// line and its sentences). The work lives in image-analysis.js, the smoothness in
// frame-meter.js. Every sentence comes from the page (script_words.palette_demo).
import { Preview, acceptDrops, fetchSample, inspect, serverObjection } from "./choosing.js";
import { ErrorLine, explain } from "./errors.js";
import { startIndicator } from "./frame-meter.js";
import { Lane, runners } from "./lanes.js";
import * as numbers from "./numbers.js";
import { format } from "./sentences.js";
import { verdict } from "./verdict.js";
import { AnalysisWorker } from "./worker-client.js";

const demo = document.getElementById("palette-demo");
const text = JSON.parse(document.getElementById("palette-demo-messages").textContent);
const $ = (selector) => demo.querySelector(selector);

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

const errors = new ErrorLine($("[data-error]"));
const preview = new Preview($("[data-preview]"));
const lanes = {};
for (const card of demo.querySelectorAll("[data-lane]")) {
  lanes[card.dataset.lane] = new Lane(card, text);
}
const verdictBox = $("[data-verdict]");
const showVerdict = () => {
  verdictBox.textContent = verdict(state.results, text);
};
const fileInput = $("#demo-file");
const serverButton = $("[data-run=server]");
const serverRefusal = $("[data-server-refusal]");
// The server lane's own limits (showcases/analysis.py), so a file it would refuse is refused
// here, before a byte is uploaded, with the limit in the page's language.
const serverLimits = {
  bytes: Number(demo.dataset.serverMaxBytes),
  pixels: Number(demo.dataset.serverMaxPixels),
};
// Read from the page at each use, so a test can point them elsewhere.
const newWorker = () =>
  new AnalysisWorker({
    url: () => demo.dataset.workerUrl,
    timeoutMs: () => Number(demo.dataset.workerTimeoutMs),
  });
const analysisWorker = newWorker();

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

// --- Choosing a photo ----------------------------------------------------------------------

// Everything the page knew about the previous photo goes, before the next one is looked at.
function forget() {
  state.generation += 1;
  state.inspector?.close();
  state.inspector = null;
  state.file = null;
  state.type = "";
  state.results = {};
  errors.clear();
  preview.clear();
  refuseServer("");
  showVerdict();
  for (const lane of Object.values(lanes)) lane.clear();
  updateButtons();
}

async function choose(file) {
  forget();
  const generation = state.generation;
  if (!file) {
    errors.show(text.notImage);
    return;
  }
  preview.pending(text.reading);
  state.inspector = newWorker();
  const found = await inspect(file, { inspector: state.inspector, text });
  if (generation !== state.generation) {
    found.bitmap?.close();
    return;
  }
  if (found.error) {
    preview.clear();
    errors.show(found.error, { detail: found.cause?.message, cause: found.cause });
    // Choosing the same file again (once fixed) must fire "change" again.
    fileInput.value = "";
    return;
  }
  state.file = file;
  state.type = found.type;
  preview.show(
    found.bitmap,
    format(text.caption, {
      width: numbers.pixels(found.width),
      height: numbers.pixels(found.height),
      size: numbers.fileSize(file.size),
    }),
  );
  refuseServer(serverObjection(file, found, { limits: serverLimits, text }));
  updateButtons();
}

fileInput.addEventListener("change", (event) => choose(event.target.files[0]));
acceptDrops($("[data-dropzone]"), choose);
// The sample is a choice like any other, made when clicked: a photo chosen while it downloads
// wins, and the sample, arriving late, is dropped.
$("[data-sample]").addEventListener("click", async () => {
  forget();
  const generation = state.generation;
  preview.pending(text.loadingSample);
  let sample;
  try {
    sample = await fetchSample(demo.dataset.sampleUrl);
  } catch (error) {
    if (generation !== state.generation) return;
    preview.clear();
    errors.show(text.sampleFailed, { detail: error.message, cause: error });
    return;
  }
  if (generation !== state.generation) return;
  choose(sample);
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

// --- Running a lane ------------------------------------------------------------------------
async function run(name) {
  if (state.busy || !state.file) return;
  const generation = state.generation;
  const lane = lanes[name];
  errors.clear();
  state.busy = true;
  updateButtons();
  delete state.results[name];
  showVerdict();
  lane.start();
  try {
    // The status must be on screen before the main lane blocks the thread that paints it.
    await painted();
    const edge = maxEdge();
    const outcome = await runners[name]({
      file: state.file,
      type: state.type,
      maxEdge: edge,
      worker: analysisWorker,
      demo,
    });
    if (generation === state.generation) {
      lane.show(outcome);
      state.results[name] = { longestFrame: outcome.longestFrame, maxEdge: edge };
      showVerdict();
    }
  } catch (error) {
    if (generation === state.generation) {
      const sentence = explain(name, error, { text, maxBytes: serverLimits.bytes });
      errors.show(sentence, { detail: error.detail || error.message, cause: error });
    }
  } finally {
    lane.end();
    state.busy = false;
    updateButtons();
  }
}

for (const button of demo.querySelectorAll("[data-run]")) {
  button.addEventListener("click", () => run(button.dataset.run));
}

demo.dataset.ready = "true";
