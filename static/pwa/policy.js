// The service worker's decisions, as pure functions of plain values: which requests it answers
// and how, which responses it may keep, which cached page stands in for a failed navigation,
// what a push shows and where a click on it goes.
// No event, no cache, no network here, so Node's test runner can check every row
// (tests/js/policy.test.mjs); /service-worker.js is the plumbing around it.
//
// A classic script, not a module: service workers load it with importScripts(), which every
// browser supports, and it sets one global. Under Node it is a CommonJS module as well.
"use strict";

const V10rPolicy = (() => {
  const CACHE_PREFIX = "v10r-";

  // Django's ManifestStaticFilesStorage puts 12 hex digits of the file's MD5 before the
  // extension: site.1a2b3c4d5e6f.css. Such a name never changes meaning, so it may be served
  // from the cache forever; an unhashed name (DEBUG, or a file outside the manifest) may not.
  const HASHED = /\.[0-9a-f]{12}\.[A-Za-z0-9]+$/;

  // How the worker handles a request:
  //   "cache-first" — a hashed static file: the cache, else the network (and keep it);
  //   "navigate"    — a page being opened: always the network, the offline page if that fails;
  //   "pass"        — not the worker's business: the browser fetches it as if no worker ran.
  // request: { method, url, mode, headers } (a Request has them all).
  // config: { origin, staticUrl: "/static/", languages: ["ru", "de"], offlinePath, never: [...] }
  function strategy(request, config) {
    if (request.method !== "GET") return "pass";
    const url = new URL(request.url);
    if (url.origin !== config.origin) return "pass";
    // htmx asks for fragments of pages (the live queue): they are data, and must be fresh.
    if (request.headers && request.headers.get("HX-Request")) return "pass";
    if (config.never.some((prefix) => withoutLanguage(url.pathname, config).startsWith(prefix))) {
      return "pass";
    }
    if (request.mode === "navigate") return "navigate";
    if (url.pathname.startsWith(config.staticUrl)) {
      // A query string this policy does not know could ask for anything: leave it alone.
      if (url.search !== "") return "pass";
      return HASHED.test(url.pathname) ? "cache-first" : "pass";
    }
    return "pass";
  }

  function isImmutable(pathname) {
    return HASHED.test(pathname);
  }

  // Whether a network response may go into the cache: a complete 200 from this origin with no
  // instruction against storing it. Decided on what a worker can read: Set-Cookie never is
  // (fetch() takes it out of every response it hands a script), so a response that sets a
  // cookie is known by the `private, no-store` the server adds to every such response
  // (core/middleware.py).
  // response: { ok, status, type, redirected, headers }.
  function mayCache(response) {
    if (!response || !response.ok || response.status !== 200) return false;
    if (response.type !== "basic" || response.redirected) return false;
    const headers = response.headers;
    const control = (headers.get("Cache-Control") || "").toLowerCase();
    if (/(^|[\s,])(no-store|private)([\s,=]|$)/.test(control)) return false;
    // Vary: Cookie (Django's mark on whatever read the session) is one visitor's answer, and
    // the worker matches with ignoreVary: kept, it would be handed to anyone.
    const vary = (headers.get("Vary") || "").split(",").map((name) => name.trim().toLowerCase());
    if (vary.includes("*") || vary.includes("cookie")) return false;
    return true;
  }

  // The language prefix of a path, "" for English at the root.
  function languageOf(pathname, config) {
    const first = pathname.split("/")[1] || "";
    return config.languages.includes(first) ? first : "";
  }

  function withoutLanguage(pathname, config) {
    const language = languageOf(pathname, config);
    return language ? pathname.slice(language.length + 1) || "/" : pathname;
  }

  // The offline page in the language of the page that could not be opened.
  function offlinePathFor(url, config) {
    const language = languageOf(new URL(url).pathname, config);
    return language ? `/${language}${config.offlinePath}` : config.offlinePath;
  }

  function cacheName(version) {
    return `${CACHE_PREFIX}${version}`;
  }

  // Caches this site made (any version), as opposed to whatever else shares the origin.
  function isOurCache(name) {
    return name.startsWith(CACHE_PREFIX);
  }

  // Web push. The payload is what the webpush channel encrypts: JSON with the keys "title",
  // "body", "url", "icon" and "lang", every one optional. Whatever arrives, something is
  // shown: the subscription promised the browser that every push is visible
  // (userVisibleOnly), and a push that shows nothing gets the browser's own generic notice.
  const MAX_TITLE = 200;
  const MAX_BODY = 1000;
  // Scripts written right to left, by language subtag: the notification reads as its text.
  const RIGHT_TO_LEFT = new Set(["ar", "dv", "fa", "he", "ks", "ku", "ps", "sd", "ug", "ur", "yi"]);
  const LANGUAGE_TAG = /^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$/;

  function text(value, limit) {
    return typeof value === "string" ? value.slice(0, limit) : "";
  }

  // A URL on this site, as an absolute href, or null for anything else: another origin, a
  // scheme such as javascript: or data:, something that is not a URL at all. Relative URLs
  // are read against the site's root.
  function sameOriginUrl(value, origin) {
    if (typeof value !== "string" || value === "") return null;
    let url;
    try {
      url = new URL(value, `${origin}/`);
    } catch {
      return null;
    }
    return url.origin === origin ? url.href : null;
  }

  // The notification for a push: showNotification's title and options.
  // data: the push's text (event.data.text()), or null when the push carried none.
  // defaults: { origin, title } — the site's origin and the title when the payload has none.
  function notificationFor(data, defaults) {
    let payload = {};
    if (typeof data === "string" && data !== "") {
      try {
        const parsed = JSON.parse(data);
        if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) payload = parsed;
      } catch {
        payload = { body: data }; // a plain-text push is shown as it came
      }
    }
    const options = {
      body: text(payload.body, MAX_BODY),
      data: { url: clickTarget({ url: payload.url }, defaults.origin) },
    };
    // Only this site's icons: a foreign one would tell its host each time a push arrives.
    const icon = sameOriginUrl(payload.icon, defaults.origin);
    if (icon) options.icon = icon;
    const lang = text(payload.lang, 35);
    if (LANGUAGE_TAG.test(lang)) {
      options.lang = lang;
      options.dir = RIGHT_TO_LEFT.has(lang.split("-")[0].toLowerCase()) ? "rtl" : "ltr";
    }
    return { title: text(payload.title, MAX_TITLE).trim() || defaults.title, options };
  }

  // Where a click on a notification goes: its data.url when that is on this site, else the
  // site's root. Never elsewhere: a push payload cannot send the reader off the site.
  function clickTarget(data, origin) {
    return sameOriginUrl(data && data.url, origin) || `${origin}/`;
  }

  // The open window to focus for target, or null to open a new one: a tab already at that
  // page (its fragment aside). clients: what clients.matchAll({ type: "window" }) found.
  function windowFor(clients, target) {
    const wanted = withoutFragment(target);
    return clients.find((client) => withoutFragment(client.url) === wanted) || null;
  }

  function withoutFragment(href) {
    const hash = href.indexOf("#");
    return hash === -1 ? href : href.slice(0, hash);
  }

  // The messages a page may send the worker.
  const MESSAGES = Object.freeze({ SKIP_WAITING: "SKIP_WAITING", FLUSH: "FLUSH" });

  return Object.freeze({
    strategy,
    isImmutable,
    mayCache,
    offlinePathFor,
    cacheName,
    isOurCache,
    notificationFor,
    clickTarget,
    windowFor,
    MESSAGES,
  });
})();

if (typeof self !== "undefined") self.V10rPolicy = V10rPolicy;
if (typeof module === "object" && module.exports) module.exports = V10rPolicy;
