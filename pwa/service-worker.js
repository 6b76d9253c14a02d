// The service worker, served as /service-worker.js by pwa/views.py, which puts
// `const CONFIG = {…};` before this text (see pwa/precache.py for what it holds). Every
// decision is V10rPolicy's (static/pwa/policy.js); this file is the plumbing: the install,
// activate, fetch, message, push and notificationclick events.
"use strict";

importScripts(CONFIG.policyUrl);
const policy = self.V10rPolicy;
const CACHE = policy.cacheName(CONFIG.version);
const rules = { ...CONFIG.policy, origin: self.location.origin };
// Set by FLUSH: from then on this worker keeps nothing more (see the message handler).
let flushed = false;

// Install: keep every hashed file the public pages load, and the offline page in each
// language, before this version may take over. A new version waits until the page says
// SKIP_WAITING (the visitor chose to reload), so one page never runs two versions' files.
// Not cache.addAll: it keeps any 200, and what is kept here must pass the same policy as
// what is kept later. As with addAll, one file that cannot be fetched fails the install,
// and nothing is kept until every one has come.
self.addEventListener("install", (event) => {
  const urls = [...CONFIG.precache, ...Object.values(CONFIG.offline)];
  event.waitUntil(
    (async () => {
      const fetched = await Promise.all(
        urls.map(async (url) => {
          const request = new Request(url, { cache: "reload" });
          const response = await fetch(request);
          if (!response.ok) throw new TypeError(`${url} answered ${response.status}`);
          return [request, response];
        }),
      );
      const cache = await caches.open(CACHE);
      await Promise.all(
        fetched
          .filter(([, response]) => policy.mayCache(response))
          .map(([request, response]) => cache.put(request, response)),
      );
    })(),
  );
});

// Activate: drop the caches of earlier versions, let navigations start while the worker
// boots, and take charge of the pages already open (on the very first install, too).
self.addEventListener("activate", (event) => {
  event.waitUntil(
    (async () => {
      for (const name of await caches.keys()) {
        if (policy.isOurCache(name) && name !== CACHE) await caches.delete(name);
      }
      if (self.registration.navigationPreload) await self.registration.navigationPreload.enable();
      await self.clients.claim();
    })(),
  );
});

self.addEventListener("fetch", (event) => {
  const how = policy.strategy(event.request, rules);
  if (how === "cache-first") event.respondWith(cacheFirst(event));
  else if (how === "navigate") event.respondWith(navigate(event));
  // "pass": no respondWith, so the browser fetches it as if no worker were here.
});

async function cacheFirst(event) {
  // A hashed name is one file's bytes forever, whatever encoding the server negotiated.
  // caches.match, not caches.open: looking must not create a cache FLUSH has deleted.
  const kept = await caches.match(event.request, { cacheName: CACHE, ignoreVary: true });
  if (kept) return kept;
  const response = await fetch(event.request);
  if (!flushed && policy.mayCache(response)) {
    const copy = response.clone();
    event.waitUntil(caches.open(CACHE).then((cache) => cache.put(event.request, copy)));
  }
  return response;
}

async function navigate(event) {
  try {
    // Started by the browser while this worker was waking (navigation preload).
    const preloaded = await event.preloadResponse;
    if (preloaded) return preloaded;
    return await fetch(event.request);
  } catch (error) {
    // The network failed (not an error page: a 404 or 500 is the server's answer, and shown).
    const offline = await caches.match(policy.offlinePathFor(event.request.url, rules), {
      cacheName: CACHE,
      ignoreVary: true,
    });
    return offline || Response.error();
  }
}

self.addEventListener("message", (event) => {
  const type = event.data && event.data.type;
  if (type === policy.MESSAGES.SKIP_WAITING) {
    self.skipWaiting();
  } else if (type === policy.MESSAGES.FLUSH) {
    // Sent when staff log out of the admin: nothing kept here may outlive a session. Until
    // the browser next starts this worker afresh, it keeps nothing more either, so the
    // logged-out page's own files do not fill the cache straight back up.
    flushed = true;
    event.waitUntil(
      (async () => {
        const names = (await caches.keys()).filter((name) => policy.isOurCache(name));
        await Promise.all(names.map((name) => caches.delete(name)));
        if (event.source) event.source.postMessage({ type: "FLUSHED", caches: names.length });
      })(),
    );
  }
});

// A push from the webpush channel (transports/): shown, whatever it carries
// (see policy.notificationFor).
self.addEventListener("push", (event) => {
  const shown = policy.notificationFor(event.data ? event.data.text() : null, {
    origin: self.location.origin,
    title: self.location.host,
  });
  event.waitUntil(self.registration.showNotification(shown.title, shown.options));
});

// A click: the tab already at the notification's page is focused, else the page is opened.
self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const target = policy.clickTarget(event.notification.data, self.location.origin);
  event.waitUntil(
    (async () => {
      const open = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
      const tab = policy.windowFor(open, target);
      if (tab) return tab.focus();
      return self.clients.openWindow(target);
    })(),
  );
});
