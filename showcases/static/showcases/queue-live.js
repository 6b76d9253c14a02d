// The live queue on /showcases/workers/: polled every 2 s while the browser is online, a
// refused "Try it" kept on screen until its wait is over, and both said in the page's language
// (script_words.live_queue).
//
// The polling and the guarded button are live-fragment.js's.

import { count, keepLive } from "./live-fragment.js";

const text = JSON.parse(document.getElementById("queue-live-messages").textContent);

// A refused try (a rate limit, a full demo queue) is rendered as the live-queue fragment,
// marked with X-Queue-Fragment.
keepLive({
  id: "queue-live",
  note: document.querySelector("[data-queue-note]"),
  text,
  header: "X-Queue-Fragment",
  action: {
    selector: ".try-it",
    offline: text.tryOffline,
    unreachable: text.tryUnreachable,
    box: "try-error",
    onRefuse: () => clearInterval(countdown),
  },
  onOnline: () => {
    const box = document.getElementById("try-error");
    if (box?.textContent === text.tryOffline) box.hidden = true;
  },
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
