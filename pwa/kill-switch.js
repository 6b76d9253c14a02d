// Served as /service-worker.js while SERVICE_WORKER_ENABLED=0: the way to take the real worker
// back from every browser that installed it. Browsers check the worker's script for changes
// on every visit (it is served with no-cache), find this one, and install it at once; it
// deletes the site's caches, unregisters itself and reloads the open pages, which then load
// straight from the network with no worker at all.
"use strict";

self.addEventListener("install", () => self.skipWaiting());

self.addEventListener("activate", (event) => {
  event.waitUntil(
    (async () => {
      const names = (await caches.keys()).filter((name) => name.startsWith("v10r-"));
      await Promise.all(names.map((name) => caches.delete(name)));
      await self.registration.unregister();
      for (const client of await self.clients.matchAll({ type: "window" })) {
        client.navigate(client.url);
      }
    })(),
  );
});
