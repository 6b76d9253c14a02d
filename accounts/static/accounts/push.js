// The preference centre's "Push notifications on this browser": shows which state is true
// and, only when a button is pressed, asks for permission and subscribes (or unsubscribes)
// through the service worker, telling the server (accounts/push_views.py). Nothing here runs
// a prompt on load: Notification.requestPermission() is called from a click alone.
const section = document.querySelector("[data-push]");
const key = section?.dataset.publicKey;

function show(state, error = "") {
  for (const line of section.querySelectorAll("[data-push-state]")) {
    line.hidden = line.dataset.pushState !== state;
  }
  section.querySelector("[data-push-error]").textContent = error;
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
  let message = `${response.status} ${response.statusText}`;
  try {
    message = (await response.json()).error || message;
  } catch {
    // Not JSON (a proxy's error page): the status says it.
  }
  throw new Error(message);
}

async function current() {
  const registration = await navigator.serviceWorker.ready;
  return registration.pushManager.getSubscription();
}

async function turnOn() {
  show("working");
  const permission = await Notification.requestPermission();
  if (permission === "denied") return show("denied");
  if (permission !== "granted") return show("dismissed");
  const registration = await navigator.serviceWorker.ready;
  const subscription = await registration.pushManager.subscribe({
    userVisibleOnly: true,
    applicationServerKey: keyBytes(key),
  });
  try {
    await send(section.dataset.subscribeUrl, subscription.toJSON());
  } catch (error) {
    // The server did not keep it: a subscription nobody sends to would only mislead.
    await subscription.unsubscribe();
    throw error;
  }
  show("on");
}

async function turnOff() {
  show("working");
  const subscription = await current();
  if (subscription) {
    try {
      await send(section.dataset.unsubscribeUrl, { endpoint: subscription.endpoint });
    } finally {
      // Off in the browser whatever the server said: its endpoint then answers the site's
      // next push with 410 Gone, and the drain forgets it.
      await subscription.unsubscribe();
    }
  }
  show("off");
}

function guarded(action) {
  return () => action().catch((error) => show("failed", error.message || String(error)));
}

async function start() {
  if (!supported()) return show("unsupported");
  if (Notification.permission === "denied") return show("denied");
  show("working");
  const subscription = Notification.permission === "granted" ? await current() : null;
  if (!subscription) return show("off");
  // The browser's subscription may be another user's now (a shared computer), or nobody's
  // (signed out, or dropped by the push service): only the server knows whose it is.
  const answer = await send(section.dataset.statusUrl, { endpoint: subscription.endpoint });
  show(answer.subscribed ? "on" : "off");
}

if (section && key) {
  section.querySelector("[data-push-on]").addEventListener("click", guarded(turnOn));
  section.querySelector("[data-push-off]").addEventListener("click", guarded(turnOff));
  guarded(start)();
}
