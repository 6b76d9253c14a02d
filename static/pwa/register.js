// Every page's side of the service worker: register it (its URL is on <html
// data-service-worker>, empty when the site has it switched off) and, when a new version has
// installed and waits, offer to reload into it. The new version takes over only when the
// visitor says so (SKIP_WAITING), so a page never mixes one version's files with another's.
const root = document.documentElement;
const url = root.dataset.serviceWorker;
const offerBox = document.querySelector("[data-update-prompt]");

async function start() {
  const registration = await navigator.serviceWorker.register(url, {
    scope: "/",
    updateViaCache: "none",
  });
  let accepted = false;
  // The first install also changes the controller (the worker claims open pages): only a
  // change the visitor asked for reloads the page.
  navigator.serviceWorker.addEventListener("controllerchange", () => {
    if (accepted) window.location.reload();
  });
  const offer = (waiting) => {
    offerBox.hidden = false;
    offerBox.querySelector("[data-update-reload]").addEventListener(
      "click",
      () => {
        accepted = true;
        waiting.postMessage({ type: "SKIP_WAITING" });
      },
      { once: true },
    );
  };
  if (registration.waiting && navigator.serviceWorker.controller) offer(registration.waiting);
  registration.addEventListener("updatefound", () => {
    const incoming = registration.installing;
    incoming.addEventListener("statechange", () => {
      // With no controller this is the first install, not an update: nothing to offer.
      if (incoming.state === "installed" && navigator.serviceWorker.controller) offer(incoming);
    });
  });
}

if (url && "serviceWorker" in navigator) {
  start().catch((error) => console.warn("The service worker could not be registered:", error));
}
