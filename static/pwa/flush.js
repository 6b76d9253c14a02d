// On the admin's "logged out" page: ask the service worker to delete the site's caches
// (FLUSH), so nothing kept during the session outlives it. <html data-caches-flushed> says how
// many it deleted, once it has answered.
const flushed = (count) => {
  document.documentElement.dataset.cachesFlushed = String(count);
};
const controller = "serviceWorker" in navigator ? navigator.serviceWorker.controller : null;
if (controller) {
  navigator.serviceWorker.addEventListener("message", (event) => {
    if (event.data && event.data.type === "FLUSHED") flushed(event.data.caches);
  });
  controller.postMessage({ type: "FLUSH" });
} else {
  flushed(0);
}
