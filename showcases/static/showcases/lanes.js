// The three lanes: each card's figures, palette and status, and the run behind each button.
// Main thread and Web Worker run image-analysis.js, the server lane posts the photo.
import { ServerFailure } from "./errors.js";
import { measured } from "./frame-meter.js";
import { analyseImage } from "./image-analysis.js";
import * as numbers from "./numbers.js";
import { format } from "./sentences.js";
import { SLOW_FRAME_MS } from "./verdict.js";

function swatchSegment({ hex, share }, text) {
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

// One lane's card (section[data-lane]); text: the page's sentences (script_words.palette_demo).
export class Lane {
  constructor(card, text) {
    this.card = card;
    this.name = card.dataset.lane;
    this.text = text;
  }

  $(selector) {
    return this.card.querySelector(selector);
  }

  clear() {
    for (const dd of this.card.querySelectorAll("[data-stat]")) {
      dd.textContent = "—";
      dd.classList.remove("slow");
      delete dd.dataset.value;
      delete dd.dataset.passes;
    }
    this.$("[data-palette]").replaceChildren();
    this.$("[data-legend]").replaceChildren();
    this.$("[data-transparent]").hidden = true;
    const firstCall = this.$("[data-first-call-note]");
    if (firstCall) firstCall.hidden = true;
    this.card.dataset.done = "false";
  }

  start() {
    this.clear();
    this.card.setAttribute("aria-busy", "true");
    this.$("[data-status]").textContent = this.text.working[this.name];
  }

  end() {
    this.card.removeAttribute("aria-busy");
    this.$("[data-status]").textContent = "";
  }

  // outcome: a runner's { result, longestFrame, extra }, extra being more figures by stat.
  show({ result, longestFrame: frame, extra = {} }) {
    const set = (stat, shown, value) => {
      const dd = this.$(`[data-stat="${stat}"]`);
      dd.textContent = shown;
      if (value !== undefined) dd.dataset.value = String(value);
      return dd;
    };
    const time = (stat, value) => set(stat, numbers.milliseconds(value), value);
    time("decode", result.decodeMs);
    // How many palette passes the time covers, the same in every lane (the page says how many).
    time("analysis", result.analysisMs).dataset.passes = String(result.passes);
    time("work", result.decodeMs + result.analysisMs);
    time("frame", frame).classList.toggle("slow", frame > SLOW_FRAME_MS);
    set(
      "size",
      format(this.text.pixels, {
        width: numbers.pixels(result.width),
        height: numbers.pixels(result.height),
      }),
    );
    for (const [stat, { shown, value }] of Object.entries(extra)) set(stat, shown, value);
    this.showPalette(result.swatches);
    this.showTransparent(result.transparent);
    const firstCall = this.$("[data-first-call-note]");
    if (firstCall) firstCall.hidden = !result.firstInProcess;
    this.card.dataset.done = "true";
  }

  // The bar shows each swatch's share; the grey left over is the pixels whose colour is near
  // none of the six. The legend says both in words, so no one needs a tooltip to read them.
  showPalette(swatches) {
    this.$("[data-palette]").replaceChildren(
      ...swatches.map((swatch) => swatchSegment(swatch, this.text)),
    );
    const items = swatches.map((swatch) => {
      const code = document.createElement("code");
      code.textContent = swatch.hex;
      return legendItem(swatch.hex, code, " ", numbers.percent(swatch.share));
    });
    const rest = 1 - swatches.reduce((sum, swatch) => sum + swatch.share, 0);
    // Shares are divisions of whole counts: a remainder under half a per mille is rounding.
    if (rest >= 0.0005) {
      const other = legendItem(
        null,
        format(this.text.otherColours, { percent: numbers.percent(rest) }),
      );
      other.dataset.other = "";
      items.push(other);
    }
    this.$("[data-legend]").replaceChildren(...items);
  }

  // The palette counts only pixels at least half opaque: when a photo has others, say how many
  // were left out, so the shares read as shares of the rest. Rounded as the shares are.
  showTransparent(share = 0) {
    const note = this.$("[data-transparent]");
    note.textContent = format(this.text.transparent, { percent: numbers.percent(share) });
    note.hidden = share < 0.0005;
  }
}

// Each lane's run on { file, type, maxEdge } (type: the file's type by its bytes), resolving
// to the outcome Lane.show takes. worker: the page's AnalysisWorker; demo: the demo's element,
// whose data attributes are read at each run, so a test can point them elsewhere.
export const runners = {
  async main({ file, type, maxEdge }) {
    const bytes = await file.arrayBuffer();
    return measured(() => analyseImage(bytes, { type, maxEdge }));
  },

  async worker({ file, type, maxEdge, worker, demo }) {
    // Read the bytes afresh: the transfer empties this buffer for good.
    const bytes = await file.arrayBuffer();
    const before = bytes.byteLength;
    let afterPost = null;
    const outcome = await measured(() => {
      const answer = worker.analyse(bytes, { type, maxEdge });
      afterPost = bytes.byteLength;
      return answer;
    });
    const shown = `${numbers.bytes(before)} → ${numbers.bytes(afterPost)}`;
    outcome.extra = { transfer: { shown, value: afterPost } };
    demo.dataset.transferredBytes = String(afterPost);
    return outcome;
  },

  // The server works at 720 px whatever the work size (analysis.MAX_EDGE).
  async server({ file, demo }) {
    const body = new FormData();
    body.append("image", file);
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
          headers: { "X-CSRFToken": demo.querySelector("input[name=csrfmiddlewaretoken]").value },
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
      // nginx's own 429 (its rate limit, deploy/nginx.conf) is English with a code; the app's
      // are translated and say how long to wait.
      if (response.status === 429 && data?.code === "too_many") {
        throw new ServerFailure("tooMany", { status: 429, detail: response.statusText });
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
    return outcome;
  },
};
