// Why turning push on failed, as one of the reasons the centre's section has a sentence for
// (accounts/templates/accounts/push_control.html), and the bound after which it stops waiting.
// Pure: push.js shows the sentence; tests/js/push-failure.test.mjs checks every row.

// How long the browser's side may take once permission is given (the service worker ready,
// the push service's subscription, the site's answer) before the section says why not.
// A push service answers in well under a second; 20 s is a browser that cannot reach it.
export const BOUND_MS = 20_000;
// Of which the service worker's start may take this much: one that has not started by then
// will not (the site's registers on every page), and the sentence for that is another.
export const WORKER_MS = 10_000;

// The error a deadline rejects with: a DOMException's name, as the browser's own would carry.
export class Timeout extends Error {
  name = "TimeoutError";
}

// The site answered with a refusal of its own: its message is already in the page's language.
export class Refused extends Error {
  name = "Refused";
}

// The site's service worker never became ready: none can run in this window.
export class NoWorker extends Error {
  name = "NoWorker";
}

// The site answered with an error page, not its JSON (a proxy's 502, a 500): nothing to quote.
export class SiteError extends Error {
  name = "SiteError";
}

// Resolve or reject as promise does, unless ms pass first: then reject with Timeout.
export function withDeadline(promise, ms, timers = globalThis) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = timers.setTimeout(() => reject(new Timeout(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => timers.clearTimeout(timer));
}

// The reason for error, by its name: browsers word their messages in their own language (or
// in English whatever the page's), but name their errors alike.
export function reasonFor(error) {
  switch (error?.name) {
    case "Refused":
      return "site-refused";
    case "SiteError":
      return "site-error";
    case "TimeoutError":
      return "timeout";
    // Chromium: "Registration failed - push service not available" / "- push service error";
    // Firefox: the push service's connection failed. But Chromium's incognito window, which
    // has no push and deliberately cannot be told apart, rejects with an AbortError too,
    // "Registration failed - permission denied" although the permission reads granted: its
    // messages are English in every locale, so that one is read by its words.
    case "AbortError":
      return /permission denied/i.test(error.message) ? "no-push-here" : "push-service";
    // Granted, yet refused: a browser without a push service of its own, or a window that
    // keeps no subscription (a private one).
    case "NotAllowedError":
      return "no-push-here";
    // No service worker can run here (a private window in some browsers, storage turned off).
    case "NoWorker":
    case "SecurityError":
    case "NotSupportedError":
    case "InvalidAccessError":
      return "no-worker";
    // fetch() could not reach the site at all.
    case "TypeError":
      return "offline";
    default:
      return "unknown";
  }
}
