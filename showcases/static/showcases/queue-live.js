// The live queue on /showcases/workers/: polled every 2 s while the browser is online, a
// refused "Try it" kept on screen until its wait is over, and both said in the page's language
// (views._queue_messages).
//
// The page polls with fetch rather than htmx's "every 2s": htmx logs two console errors of its
// own for every request that fails, on top of the browser's one, and cannot be told to wait
// while the browser is offline. The answer is swapped in by htmx all the same.

const POLL_MS = 2000;
// Each failed poll doubles the wait before the next, up to a minute.
const MAX_POLL_MS = 60_000;

const text = JSON.parse(document.getElementById("queue-live-messages").textContent);
const note = document.querySelector("[data-queue-note]");
const count = (value) =>
  new Intl.NumberFormat(document.documentElement.lang || undefined).format(value);

let delay = POLL_MS;
let timer = null;
// Bumped by every "Try it": a poll sent before it answers with the queue as it was before.
let tries = 0;

function say(message) {
  note.textContent = message;
  note.hidden = !message;
  document.getElementById("queue-live")?.classList.toggle("stale", Boolean(message));
}

function schedule(ms) {
  clearTimeout(timer);
  timer = setTimeout(poll, ms);
}

async function poll() {
  clearTimeout(timer);
  const live = document.getElementById("queue-live");
  if (!live) return;
  if (navigator.onLine === false) {
    // Nothing to ask until the browser says it is back ("online" below).
    say(text.offline);
    return;
  }
  const triesBefore = tries;
  let html = null;
  try {
    const response = await fetch(live.dataset.pollUrl, { headers: { "HX-Request": "true" } });
    if (response.ok) html = await response.text();
  } catch {
    // The browser has already logged the failed request; the note below says the rest.
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
  if (triesBefore === tries && document.getElementById("queue-live") === live) {
    htmx.swap(live, html, { swapStyle: "outerHTML" });
  }
  say("");
  schedule(delay);
}

window.addEventListener("offline", () => {
  clearTimeout(timer);
  say(text.offline);
});
window.addEventListener("online", () => {
  const box = document.getElementById("try-error");
  if (box?.textContent === text.tryOffline) box.hidden = true;
  delay = POLL_MS;
  poll();
});
schedule(POLL_MS);

// htmx leaves 4xx and 5xx answers unswapped, which would make a refused "Try it" silent. The
// server marks the refusals it renders as the live-queue fragment (a rate limit, a full demo
// queue) with an X-Queue-Fragment header; those are swapped in like any answer. An error page
// from a proxy in front of the site carries no such header and is still left alone.
document.addEventListener("htmx:beforeSwap", (event) => {
  if (event.detail.xhr.getResponseHeader("X-Queue-Fragment")) {
    event.detail.shouldSwap = true;
    event.detail.isError = false;
  }
});
const isTry = (event) => Boolean(event.detail.elt.matches?.(".try-it"));

function refuseTry(message) {
  const box = document.getElementById("try-error");
  clearInterval(countdown);
  box.textContent = message;
  box.hidden = false;
}

document.addEventListener("htmx:beforeRequest", (event) => {
  if (!isTry(event)) return;
  // Offline the post cannot get through: say so rather than fail in the console.
  if (navigator.onLine === false) {
    event.preventDefault();
    refuseTry(text.tryOffline);
    return;
  }
  tries += 1;
});
document.addEventListener("htmx:sendError", (event) => {
  if (isTry(event)) refuseTry(navigator.onLine === false ? text.tryOffline : text.tryUnreachable);
});

// --- A refused try -------------------------------------------------------------------------
// Shown until data-retry-after seconds from when it arrived; a data-countdown sentence is
// rewritten every second with the seconds left.
let countdown = null;
let shown = null; // the #try-error element being kept

function keepTryError() {
  const box = document.getElementById("try-error");
  if (box === shown) return;
  shown = box;
  clearInterval(countdown);
  if (!box || box.hidden || !box.dataset.retryAfter) return;
  const until = performance.now() + Number(box.dataset.retryAfter) * 1000;
  const tick = () => {
    const left = Math.ceil((until - performance.now()) / 1000);
    if (document.getElementById("try-error") !== box) {
      clearInterval(countdown);
    } else if (left <= 0) {
      clearInterval(countdown);
      box.textContent = "";
      box.hidden = true;
    } else if (box.dataset.countdown) {
      box.textContent = box.dataset.countdown.replace("{seconds}", count(left));
    }
  };
  tick();
  countdown = setInterval(tick, 1000);
}

// Every answer to "Try it" brings a new #try-error, out of band.
document.addEventListener("htmx:afterSettle", keepTryError);
keepTryError();
