// The palette demo's verdict (static/showcases/verdict.js): which sentence two browser lanes'
// longest frames earn. tests/pwa/test_policy.py runs every file here under Node's test runner.
import assert from "node:assert/strict";
import { test } from "node:test";

import { SLOW_FRAME_MS, verdict } from "../../showcases/static/showcases/verdict.js";

// Each sentence names itself and its values, so a test reads which one was chosen and with what.
const text = {
  verdictMixed: "mixed",
  verdictNeither: "neither {main} {worker}",
  verdictMainSlow: "main slow {main} {worker}",
  verdictWorkerSmoother: { one: "smoother {ratio} time", other: "smoother {ratio} times" },
  verdictWorkerSlow: "worker slow {worker} {main} {limit}",
  verdictBothSlow: "both slow {main} {worker}",
  verdictBothSlowMainLonger: "main longer {main} {worker}",
  verdictBothSlowWorkerLonger: "worker longer {worker} {main}",
  verdictClose: "close {main} {worker}",
  tryFullResolution: "try full",
};
const lanes = (main, worker, { mainEdge = 720, workerEdge = mainEdge } = {}) => ({
  main: { longestFrame: main, maxEdge: mainEdge },
  worker: { longestFrame: worker, maxEdge: workerEdge },
});

test("there is no verdict until both browser lanes have run", () => {
  assert.equal(verdict({}, text), "");
  assert.equal(verdict({ main: lanes(500, 10).main }, text), "");
  assert.equal(verdict({ worker: lanes(500, 10).worker }, text), "");
});

test("lanes run at different work sizes are not compared", () => {
  assert.equal(verdict(lanes(900, 10, { mainEdge: 0, workerEdge: 720 }), text), "mixed");
});

test("when neither lane stalled, a 720 px run suggests full resolution and a full one does not", () => {
  assert.equal(verdict(lanes(20, 17), text), "neither 20 ms 17 ms try full");
  assert.equal(verdict(lanes(20, 17, { mainEdge: 0 }), text), "neither 20 ms 17 ms");
});

test("a main thread that froze beside a smooth worker is said to have frozen", () => {
  assert.equal(verdict(lanes(900, 17), text), "main slow 900 ms 17 ms");
});

test("both slow, the main thread far slower: the worker is smoother by a whole ratio", () => {
  assert.equal(verdict(lanes(400, 100), text), "smoother 4 times");
  assert.equal(verdict(lanes(250, 100), text), "smoother 3 times");
});

test("a worker lane far slower than the main thread is said to be", () => {
  assert.equal(verdict(lanes(17, 400), text), `worker slow 400 ms 17 ms ${SLOW_FRAME_MS} ms`);
});

test("two slow frames of about the same length blame the machine", () => {
  assert.equal(verdict(lanes(300, 250), text), "both slow 300 ms 250 ms");
});

test("twice as long but less than a stutter apart is close, not far longer", () => {
  assert.equal(verdict(lanes(40, 17), text), "close 40 ms 17 ms try full");
});

// Both slow, neither twice the other: about the same only within a fifth, or a stutter.
for (const [main, worker, said] of [
  [300, 250, "both slow 300 ms 250 ms"], // 1.2 times: within a fifth
  [250, 300, "both slow 250 ms 300 ms"],
  [60, 40, "both slow 60 ms 40 ms"], // 1.5 times, but 20 ms: less than a stutter apart
  [138, 91, "main longer 138 ms 91 ms"], // 1.52 times and 47 ms: not "about the same"
  [91, 138, "worker longer 138 ms 91 ms"],
  [301, 250, "main longer 301 ms 250 ms"], // just past a fifth
  [199, 100, "main longer 199 ms 100 ms"], // not yet twice
]) {
  test(`both slow at ${main} ms and ${worker} ms: ${said}`, () => {
    assert.equal(verdict(lanes(main, worker), text), said);
  });
}
