// The preference centre's "Push notifications on this browser": shows which state is true
// and, only when a button is pressed, asks for permission and subscribes (or unsubscribes)
// through the service worker, telling the server (accounts/push_views.py). Nothing here runs
// a prompt on load: Notification.requestPermission() is called from a click alone. Whatever
// the browser does, the section ends on a state within BOUND_MS, and a failure says why in the
// page's language (push-failure.js picks the reason; the template has each one's sentence).
import {
  BOUND_MS,
  NoWorker,
  Refused,
  SiteError,
  WORKER_MS,
  reasonFor,
  withDeadline,
} from "./push-failure.js";

const section = document.querySelector("[data-push]");
const key = section?.dataset.publicKey;

function show(state, failure = null) {
  for (const line of section.querySelectorAll("[data-push-state]")) {
    line.hidden = line.dataset.pushState !== state;
  }
  const reason = failure ? reasonFor(failure) : "";
  for (const sentence of section.querySelectorAll("[data-push-reason]")) {
    sentence.hidden = sentence.dataset.pushReason !== reason;
  }
  // Only the site's own refusal is quoted: it is in the page's language. A browser's message
  // is not (Chromium's are English whatever the page), so it goes to the console alone.
  section.querySelector("[data-push-error]").textContent =
    reason === "site-refused" ? failure.message : "";
  if (failure && reason !== "site-refused") console.warn("push:", failure);
  section.querySelector("[data-push-on]").hidden = !["off", "dismissed", "failed"].includes(state);
  section.querySelector("[data-push-off]").hidden = state !== "on";
}

function supported() {
  return (
    document.documentElement.dataset.serviceWorker && // the site's worker is switched on
    "serviceWorker" in navigator &&
    "PushManager" in window &&
    "Notification" in window
  );
}

// The VAPID public key arrives as base64url; pushManager.subscribe takes its bytes.
function keyBytes(base64url) {
  const base64 = base64url.replace(/-/g, "+").replace(/_/g, "/");
  const text = atob(base64 + "=".repeat((4 - (base64.length % 4)) % 4));
  return Uint8Array.from(text, (c) => c.charCodeAt(0));
}

async function send(url, body) {
  return (await post(url, body)).json();
}

async function post(url, body) {
  const response = await fetch(url, {
    method: "POST",
    credentials: "same-origin",
    headers: {
      "Content-Type": "application/json",
      "X-CSRFToken": section.querySelector("[data-push-csrf]").value,
    },
    body: JSON.stringify(body),
  });
  if (response.ok) return response;
  let message = "";
  try {
    message = (await response.json()).error || "";
  } catch {
    // Not JSON (a proxy's error page): nothing in the page's language to quote.
  }
  throw message ? new Refused(message) : new SiteError(`${response.status}`);
}

// The site's service worker, once it runs. `ready` never settles where none can run (a
// private window in some browsers), so it has WORKER_MS.
async function registered() {
  try {
    return await withDeadline(navigator.serviceWorker.ready, WORKER_MS);
  } catch (error) {
    throw error?.name === "TimeoutError" ? new NoWorker(error.message) : error;
  }
}

async function current() {
  return (await registered()).pushManager.getSubscription();
}

async function subscribe(registration) {
  const options = { userVisibleOnly: true, applicationServerKey: keyBytes(key) };
  try {
    return await registration.pushManager.subscribe(options);
  } catch (error) {
    if (error?.name !== "InvalidStateError") throw error;
    // A subscription made with the site's previous key pair (docs/webpush.md, Keys) blocks a
    // new one: it is dead already, so it goes, and the browser subscribes afresh.
    await (await registration.pushManager.getSubscription())?.unsubscribe();
    return registration.pushManager.subscribe(options);
  }
}

async function subscribeHere() {
  const registration = await registered();
  const subscription = await subscribe(registration);
  try {
    await send(section.dataset.subscribeUrl, subscription.toJSON());
  } catch (error) {
    // The server did not keep it: a subscription nobody sends to would only mislead.
    await subscription.unsubscribe();
    throw error;
  }
}

async function turnOn() {
  show("working");
  // The person's own time, however long they take to answer the prompt: not bounded.
  const permission = await Notification.requestPermission();
  if (permission === "denied") return show("denied");
  if (permission !== "granted") return show("dismissed");
  const attempt = subscribeHere();
  try {
    await withDeadline(attempt, BOUND_MS);
  } catch (error) {
    show("failed", error);
    // Given up on, not stopped: should the browser still finish, the section says so.
    if (error?.name === "TimeoutError") attempt.then(() => show("on")).catch(() => {});
    return;
  }
  show("on");
}

async function turnOff() {
  show("working");
  const subscription = await current();
  if (subscription) {
    try {
      const endpoint = subscription.endpoint;
      await withDeadline(send(section.dataset.unsubscribeUrl, { endpoint }), BOUND_MS);
    } finally {
      // Off in the browser whatever the server said: its endpoint then answers the site's
      // next push with 410 Gone, and the drain forgets it.
      await subscription.unsubscribe();
    }
  }
  show("off");
}

function guarded(action) {
  return () => action().catch((error) => show("failed", error));
}

async function start() {
  if (!supported()) return show("unsupported");
  if (Notification.permission === "denied") return show("denied");
  show("working");
  const granted = Notification.permission === "granted";
  const subscription = granted ? await current() : null;
  if (!subscription) return show("off");
  // The browser's subscription may be another user's now (a shared computer), or nobody's
  // (signed out, or dropped by the push service): only the server knows whose it is.
  const endpoint = subscription.endpoint;
  const answer = await withDeadline(send(section.dataset.statusUrl, { endpoint }), BOUND_MS);
  show(answer.subscribed ? "on" : "off");
}

if (section && key) {
  section.querySelector("[data-push-on]").addEventListener("click", guarded(turnOn));
  section.querySelector("[data-push-off]").addEventListener("click", guarded(turnOff));
  guarded(start)();
}
