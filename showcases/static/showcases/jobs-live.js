// The live log on /showcases/jobs/: polled every 2 s while the browser is online, as the
// workers page's live queue is, and "Run the demo job" answered with the log itself.
//
// Polled with fetch rather than htmx's "every 2s", for the reasons queue-live.js gives (htmx's
// own console errors for every failed request; no waiting while offline); the answer is
// swapped in by htmx all the same.

const POLL_MS = 2000;
const MAX_POLL_MS = 60_000;

const text = JSON.parse(document.getElementById("job-log-messages").textContent);
const note = document.querySelector("[data-log-note]");
const count = (value) =>
  new Intl.NumberFormat(document.documentElement.lang || undefined).format(value);

let delay = POLL_MS;
let timer = null;
// Bumped by every run asked for: a poll sent before it answers with the log as it was.
let runs = 0;

function say(message) {
  note.textContent = message;
  note.hidden = !message;
  document.getElementById("job-log")?.classList.toggle("stale", Boolean(message));
}

function schedule(ms) {
  clearTimeout(timer);
  timer = setTimeout(poll, ms);
}

async function poll() {
  clearTimeout(timer);
  const log = document.getElementById("job-log");
  if (!log) return;
  if (navigator.onLine === false) {
    say(text.offline);
    return;
  }
  const runsBefore = runs;
  let html = null;
  try {
    const response = await fetch(log.dataset.pollUrl, { headers: { "HX-Request": "true" } });
    if (response.ok) html = await response.text();
  } catch {
    // The browser has logged the failed request; the note says the rest.
  }
  if (html === null) {
    delay = Math.min(delay * 2, MAX_POLL_MS);
    say(
      navigator.onLine === false
        ? text.offline
        : text.unreachable.replace("{seconds}", count(delay / 1000)),
    );
    if (navigator.onLine !== false) schedule(delay);
    return;
  }
  delay = POLL_MS;
  if (runsBefore === runs && document.getElementById("job-log") === log) {
    htmx.swap(log, html, { swapStyle: "outerHTML" });
  }
  say("");
  schedule(delay);
}

window.addEventListener("offline", () => {
  clearTimeout(timer);
  say(text.offline);
});
window.addEventListener("online", () => {
  delay = POLL_MS;
  poll();
});

// A refused run (the rate limit) is rendered as the log with its reason out of band, marked
// with X-Jobs-Fragment; htmx leaves 4xx answers unswapped unless told.
document.addEventListener("htmx:beforeSwap", (event) => {
  if (event.detail.xhr.getResponseHeader("X-Jobs-Fragment")) {
    event.detail.shouldSwap = true;
    event.detail.isError = false;
  }
});

const isRun = (event) => Boolean(event.detail.elt.matches?.(".run-demo"));

function refuse(message) {
  const box = document.getElementById("demo-error");
  box.textContent = message;
  box.hidden = false;
}

document.addEventListener("htmx:beforeRequest", (event) => {
  if (!isRun(event)) return;
  if (navigator.onLine === false) {
    event.preventDefault();
    refuse(text.runOffline);
    return;
  }
  runs += 1;
});
document.addEventListener("htmx:sendError", (event) => {
  if (isRun(event)) refuse(navigator.onLine === false ? text.runOffline : text.runUnreachable);
});

schedule(POLL_MS);
