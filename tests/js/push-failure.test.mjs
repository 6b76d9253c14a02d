// Why turning push on failed (accounts/static/accounts/push-failure.js): each error a browser or
// the site gives maps to a reason the centre has a sentence for, and the bound gives up in time.
// tests/pwa/test_policy.py runs every file here under Node's test runner.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, mock, test } from "node:test";

import {
  BOUND_MS,
  NoWorker,
  Refused,
  SiteError,
  Timeout,
  WORKER_MS,
  reasonFor,
  withDeadline,
} from "../../accounts/static/accounts/push-failure.js";

const TEMPLATE = readFileSync(
  new URL("../../accounts/templates/accounts/push_control.html", import.meta.url),
  "utf8",
);

// A DOMException as a browser throws it: the name is what is read, never the words.
const dom = (name, message = "Registration failed - something in English") =>
  new DOMException(message, name);

describe("reasonFor", () => {
  const rows = [
    // Chromium's incognito window (and Playwright's contexts, which are incognito): granted,
    // yet refused, with an AbortError that only its words tell from a push service's trouble.
    [dom("AbortError", "Registration failed - permission denied"), "no-push-here"],
    [dom("NotAllowedError", "Registration failed - permission denied"), "no-push-here"],
    [dom("NotAllowedError", "Permission denied"), "no-push-here"],
    [dom("AbortError", "Registration failed - push service not available"), "push-service"],
    [dom("AbortError", "Error retrieving push subscription."), "push-service"],
    [new Timeout("no answer"), "timeout"],
    [new NoWorker("never ready"), "no-worker"],
    [dom("SecurityError", "Failed to register a ServiceWorker"), "no-worker"],
    [dom("NotSupportedError"), "no-worker"],
    [dom("InvalidAccessError"), "no-worker"],
    [new TypeError("Failed to fetch"), "offline"],
    [new TypeError("NetworkError when attempting to fetch resource."), "offline"],
    [new Refused("Zu viele Änderungen."), "site-refused"],
    [new SiteError("502"), "site-error"],
    [dom("InvalidStateError"), "unknown"],
    [new Error("anything else"), "unknown"],
    ["a bare string", "unknown"],
    [undefined, "unknown"],
  ];
  for (const [error, reason] of rows) {
    test(`${error?.name ?? typeof error}: ${error?.message ?? error} → ${reason}`, () => {
      assert.equal(reasonFor(error), reason);
    });
  }

  test("every reason has its sentence in the template, and every sentence a reason", () => {
    const reasons = new Set(rows.map(([, reason]) => reason));
    const named = TEMPLATE.matchAll(/data-push-reason="([a-z-]+)"/g);
    const sentences = new Set([...named].map((match) => match[1]));
    assert.deepEqual([...sentences].sort(), [...reasons].sort());
  });

  test("the timeout's sentence names the bound", () => {
    assert.match(TEMPLATE, new RegExp(`within ${BOUND_MS / 1000} seconds`));
    assert.ok(WORKER_MS < BOUND_MS, "the worker's wait ends before the whole attempt's");
  });
});

describe("withDeadline", () => {
  test("passes on what settles in time", async () => {
    assert.equal(await withDeadline(Promise.resolve(7), 1000), 7);
    await assert.rejects(withDeadline(Promise.reject(new TypeError("x")), 1000), TypeError);
  });

  test("gives up on what never settles, once the bound has passed and not before", async () => {
    mock.timers.enable({ apis: ["setTimeout"] });
    try {
      let outcome = "waiting";
      withDeadline(new Promise(() => {}), BOUND_MS).then(
        () => (outcome = "resolved"),
        (error) => (outcome = error.name),
      );
      mock.timers.tick(BOUND_MS - 1);
      await Promise.resolve();
      assert.equal(outcome, "waiting");
      mock.timers.tick(1);
      // Let the race's rejection and the handlers run.
      for (let i = 0; i < 5; i++) await Promise.resolve();
      assert.equal(outcome, "TimeoutError");
    } finally {
      mock.timers.reset();
    }
  });

  test("leaves no timer behind once the promise settles", async () => {
    const timers = {
      pending: 0,
      setTimeout: () => ++timers.pending,
      clearTimeout: () => timers.pending--,
    };
    await withDeadline(Promise.resolve(), BOUND_MS, timers);
    assert.equal(timers.pending, 0);
  });
});
