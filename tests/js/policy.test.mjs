// The service worker's policy (static/pwa/policy.js), row by row, under Node's test runner.
// tests/pwa/test_policy.py runs this file, so `make test` does too.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { describe, test } from "node:test";

const require = createRequire(import.meta.url);
const policy = require("../../static/pwa/policy.js");

const ORIGIN = "https://v10r.example";
// The shape pwa/views.py gives the worker.
const config = {
  origin: ORIGIN,
  staticUrl: "/static/",
  languages: ["ru", "de"],
  offlinePath: "/offline/",
  never: [
    "/admin/",
    "/cron/",
    "/showcases/workers/analyse/",
    "/showcases/workers/queue/",
    "/showcases/workers/try/",
    "/service-worker.js",
  ],
};

const request = (path, { method = "GET", mode = "cors", headers = {}, origin = ORIGIN } = {}) => ({
  method,
  mode,
  url: new URL(path, origin).href,
  headers: new Headers(headers),
});

const response = ({
  status = 200,
  type = "basic",
  redirected = false,
  headers = { "Content-Type": "text/css", "Cache-Control": "max-age=315360000, public, immutable" },
} = {}) => ({
  ok: status >= 200 && status < 300,
  status,
  type,
  redirected,
  headers: new Headers(headers),
});

const HASHED_CSS = "/static/css/site.0123456789ab.css";
const HASHED_WORKER = "/static/showcases/image-analysis.worker.a1b2c3d4e5f6.js";

describe("strategy: which requests the worker answers, and how", () => {
  const rows = [
    ["a hashed stylesheet", request(HASHED_CSS), "cache-first"],
    ["the hashed Web Worker module", request(HASHED_WORKER), "cache-first"],
    ["a hashed icon", request("/static/icons/icon-192.00aa11bb22cc.png"), "cache-first"],
    ["an unhashed static file (DEBUG)", request("/static/css/site.css"), "pass"],
    ["a name with 11 hex digits", request("/static/css/site.0123456789a.css"), "pass"],
    ["upper-case hex is not Django's", request("/static/css/site.0123456789AB.css"), "pass"],
    ["a hashed file with a query string", request(`${HASHED_CSS}?v=2`), "pass"],
    ["a hashed file from another origin", request(HASHED_CSS, { origin: "https://cdn.example" }), "pass"],
    ["a hashed file POSTed", request(HASHED_CSS, { method: "POST" }), "pass"],
    ["a page opened", request("/showcases/workers/", { mode: "navigate" }), "navigate"],
    ["a Russian page opened", request("/ru/showcases/workers/", { mode: "navigate" }), "navigate"],
    ["the home page opened", request("/", { mode: "navigate" }), "navigate"],
    ["a page opened with a query", request("/?utm=x", { mode: "navigate" }), "navigate"],
    ["a page fetched by script", request("/showcases/workers/"), "pass"],
    ["the admin opened", request("/admin/", { mode: "navigate" }), "pass"],
    ["the Russian admin opened", request("/ru/admin/login/", { mode: "navigate" }), "pass"],
    ["an admin stylesheet", request("/static/admin/css/base.0123456789ab.css"), "cache-first"],
    ["an admin page by script", request("/de/admin/notifications/"), "pass"],
    ["the cron trigger", request("/cron/drain", { mode: "navigate" }), "pass"],
    ["the live queue (htmx)", request("/showcases/workers/queue/", { headers: { "HX-Request": "true" } }), "pass"],
    ["any htmx fragment", request("/showcases/workers/", { headers: { "HX-Request": "true" } }), "pass"],
    ["the live queue opened", request("/ru/showcases/workers/queue/", { mode: "navigate" }), "pass"],
    ["Try it", request("/showcases/workers/try/", { method: "POST", mode: "navigate" }), "pass"],
    ["the analyse endpoint", request("/showcases/workers/analyse/", { method: "POST" }), "pass"],
    ["the analyse endpoint by GET", request("/de/showcases/workers/analyse/"), "pass"],
    ["the worker's own script", request("/service-worker.js"), "pass"],
    ["the sample photo", request("/showcases/workers/sample.jpg"), "pass"],
    ["the manifest", request("/manifest.webmanifest"), "pass"],
    ["a HEAD request", request(HASHED_CSS, { method: "HEAD" }), "pass"],
    ["a language-like prefix that is not one", request("/rux/admin/", { mode: "navigate" }), "navigate"],
  ];
  for (const [name, given, expected] of rows) {
    test(`${name} → ${expected}`, () => assert.equal(policy.strategy(given, config), expected));
  }
});

describe("mayCache: which responses may be kept", () => {
  const rows = [
    ["a 200 with immutable caching", response(), true],
    ["a 200 without Cache-Control", response({ headers: { "Content-Type": "text/css" } }), true],
    ["a 404", response({ status: 404 }), false],
    ["a 206 partial", response({ status: 206 }), false],
    ["a 204 with no body", response({ status: 204 }), false],
    ["a 500", response({ status: 500 }), false],
    ["an opaque (cross-origin, no-cors) response", response({ type: "opaque" }), false],
    ["a CORS response from elsewhere", response({ type: "cors" }), false],
    ["a redirected response", response({ redirected: true }), false],
    // What a worker is handed for a response that set a cookie: no Set-Cookie (fetch() takes
    // it out), and the Cache-Control the server adds to every such response.
    ["one that set a cookie, as a worker sees it", response({ headers: { "Cache-Control": "private, no-store" } }), false],
    // Node's Headers, unlike a browser's fetch(), shows Set-Cookie; the policy does not read it.
    ["Set-Cookie alone, which no browser shows a worker", response({ headers: { "Set-Cookie": "sessionid=1" } }), true],
    ["no-store with a max-age", response({ headers: { "Cache-Control": "max-age=60, no-store" } }), false],
    ["no-store", response({ headers: { "Cache-Control": "no-store" } }), false],
    ["private", response({ headers: { "Cache-Control": "private, max-age=60" } }), false],
    ["PRIVATE in capitals", response({ headers: { "Cache-Control": "max-age=60, PRIVATE" } }), false],
    ["private with a field list", response({ headers: { "Cache-Control": 'private="Set-Cookie"' } }), false],
    ["no-cache (revalidate, but may store)", response({ headers: { "Cache-Control": "no-cache" } }), true],
    ["a directive that merely contains 'private'", response({ headers: { "Cache-Control": "x-notprivate" } }), true],
    ["Vary: *", response({ headers: { Vary: "*" } }), false],
    ["Vary: Accept-Encoding", response({ headers: { Vary: "Accept-Encoding" } }), true],
    ["Vary: Cookie (it read the session)", response({ headers: { Vary: "Cookie" } }), false],
    ["Vary: Accept-Language, cookie", response({ headers: { Vary: "Accept-Language, cookie" } }), false],
    ["Vary: *, among others", response({ headers: { Vary: "Accept-Encoding, *" } }), false],
    ["Vary: a name that merely contains Cookie", response({ headers: { Vary: "X-Cookie-Consent" } }), true],
    ["no response at all", undefined, false],
  ];
  for (const [name, given, expected] of rows) {
    test(`${name} → ${expected}`, () => assert.equal(policy.mayCache(given), expected));
  }
});

describe("offlinePathFor: the offline page in the page's language", () => {
  const rows = [
    [`${ORIGIN}/showcases/workers/`, "/offline/"],
    [`${ORIGIN}/`, "/offline/"],
    [`${ORIGIN}/ru/showcases/workers/`, "/ru/offline/"],
    [`${ORIGIN}/ru/`, "/ru/offline/"],
    [`${ORIGIN}/de`, "/de/offline/"],
    [`${ORIGIN}/fr/showcases/`, "/offline/"],
    [`${ORIGIN}/russian/`, "/offline/"],
  ];
  for (const [url, expected] of rows) {
    test(`${url} → ${expected}`, () => assert.equal(policy.offlinePathFor(url, config), expected));
  }
});

describe("caches and messages", () => {
  test("a version names one cache of this site's", () => {
    assert.equal(policy.cacheName("3f2a"), "v10r-3f2a");
    assert.ok(policy.isOurCache(policy.cacheName("3f2a")));
    assert.ok(!policy.isOurCache("workbox-precache-v2"));
  });
  test("only the immutable names count as immutable", () => {
    assert.ok(policy.isImmutable(HASHED_CSS));
    assert.ok(!policy.isImmutable("/static/css/site.css"));
  });
  test("the two messages a page may send", () => {
    assert.deepEqual({ ...policy.MESSAGES }, { SKIP_WAITING: "SKIP_WAITING", FLUSH: "FLUSH" });
    assert.ok(Object.isFrozen(policy.MESSAGES));
  });
});

// Web push: the payload the webpush channel sends, and what the worker shows for it.
const site = { origin: ORIGIN, title: "v10r.example" };
const push = (payload) => policy.notificationFor(JSON.stringify(payload), site);

describe("notificationFor: what a push shows", () => {
  test("a whole payload: title, body, this site's URL and icon, language and direction", () => {
    const shown = push({
      title: "Your export is ready",
      body: "3 files",
      url: "/ru/account/notifications/",
      icon: "/static/pwa/icon-192.png",
      lang: "ru",
    });
    assert.deepEqual(shown, {
      title: "Your export is ready",
      options: {
        body: "3 files",
        data: { url: `${ORIGIN}/ru/account/notifications/` },
        icon: `${ORIGIN}/static/pwa/icon-192.png`,
        lang: "ru",
        dir: "ltr",
      },
    });
  });
  test("a right-to-left language reads right to left", () => {
    assert.equal(push({ title: "x", lang: "he-IL" }).options.dir, "rtl");
    assert.equal(push({ title: "x", lang: "ar" }).options.dir, "rtl");
  });
  const root = `${ORIGIN}/`;
  const nothing = { title: "v10r.example", body: "", url: root };
  const titled = { title: "t", body: "", url: root };
  const rows = [
    ["no data at all", null, nothing],
    ["an empty push", "", nothing],
    ["plain text", "Hello", { ...nothing, body: "Hello" }],
    ["a JSON array", "[1,2]", nothing],
    ["JSON null", "null", nothing],
    ["a blank title", JSON.stringify({ title: "  ", body: "b" }), { ...nothing, body: "b" }],
    [
      "fields of the wrong type",
      JSON.stringify({ title: 5, body: { a: 1 }, url: 7 }),
      nothing,
    ],
    ["a foreign URL", JSON.stringify({ title: "t", url: "https://evil.example/" }), titled],
    ["a javascript: URL", JSON.stringify({ title: "t", url: "javascript:alert(1)" }), titled],
    ["a protocol-relative URL", JSON.stringify({ title: "t", url: "//evil.example/x" }), titled],
    ["a malformed URL", JSON.stringify({ title: "t", url: "http://[::1" }), titled],
    [
      "an absolute URL on this site",
      JSON.stringify({ title: "t", url: `${ORIGIN}/de/x?y=1#z` }),
      { ...titled, url: `${ORIGIN}/de/x?y=1#z` },
    ],
  ];
  for (const [name, data, expected] of rows) {
    test(name, () => {
      const shown = policy.notificationFor(data, site);
      assert.deepEqual(
        { title: shown.title, body: shown.options.body, url: shown.options.data.url },
        expected,
      );
    });
  }
  test("a foreign or data: icon is left out, and so is a language that is no tag", () => {
    const shown = push({ title: "t", icon: "https://tracker.example/p.png", lang: "en<script>" });
    assert.equal(shown.options.icon, undefined);
    assert.equal(push({ title: "t", icon: "data:image/png;base64,AAAA" }).options.icon, undefined);
    assert.equal(shown.options.lang, undefined);
    assert.equal(shown.options.dir, undefined);
  });
  test("an overlong title and body are cut", () => {
    const shown = push({ title: "t".repeat(5000), body: "b".repeat(50000) });
    assert.equal(shown.title.length, 200);
    assert.equal(shown.options.body.length, 1000);
  });
});

describe("clickTarget and windowFor: where a click goes", () => {
  test("the notification's URL on this site, else the root", () => {
    assert.equal(policy.clickTarget({ url: `${ORIGIN}/a/` }, ORIGIN), `${ORIGIN}/a/`);
    assert.equal(policy.clickTarget({ url: "https://evil.example/" }, ORIGIN), `${ORIGIN}/`);
    assert.equal(policy.clickTarget(null, ORIGIN), `${ORIGIN}/`);
    assert.equal(policy.clickTarget({}, ORIGIN), `${ORIGIN}/`);
  });
  const tabs = [{ url: `${ORIGIN}/` }, { url: `${ORIGIN}/a/#top` }, { url: `${ORIGIN}/b/?q=1` }];
  test("the tab already at the page, its fragment aside", () => {
    assert.equal(policy.windowFor(tabs, `${ORIGIN}/a/`), tabs[1]);
    assert.equal(policy.windowFor(tabs, `${ORIGIN}/a/#other`), tabs[1]);
    assert.equal(policy.windowFor(tabs, `${ORIGIN}/b/?q=1`), tabs[2]);
  });
  test("none when no tab is at it: the page is opened", () => {
    assert.equal(policy.windowFor(tabs, `${ORIGIN}/b/`), null);
    assert.equal(policy.windowFor([], `${ORIGIN}/`), null);
  });
});
