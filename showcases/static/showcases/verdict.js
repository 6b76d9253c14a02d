// What the two browser lanes' longest frames show, compared with each other, and nothing more.
import * as numbers from "./numbers.js";
import { format } from "./sentences.js";

// A frame longer than two at 60 Hz is a stutter a visitor sees: marked red, and the verdict's
// line between "stalled" and "kept moving".
export const SLOW_FRAME_MS = 32;

// One lane's longest frame is far longer than the other's when it is at least twice as long
// and at least one stutter (SLOW_FRAME_MS) longer: the ratio alone would part 40 ms from 17 ms,
// both a single brief hitch at most, and the difference alone 1,000 ms from 1,050 ms, two
// freezes a visitor cannot tell apart.
const FAR_RATIO = 2;
const farLonger = (long, short) => long >= FAR_RATIO * short && long - short >= SLOW_FRAME_MS;

// Two longest frames are about the same length when they are less than one stutter apart, or
// the longer is at most a fifth longer: about the smallest difference people notice between
// two durations of a tenth of a second or more (a Weber fraction of 0.1 to 0.2). 138 ms
// against 91 ms is half as long again: noticeably longer, if not far longer.
const SAME_RATIO = 1.2;
const aboutTheSame = (a, b) => {
  const [long, short] = a >= b ? [a, b] : [b, a];
  return long - short < SLOW_FRAME_MS || long <= SAME_RATIO * short;
};

// main, worker: each lane's { longestFrame, maxEdge }, once it has run; text: the page's
// sentences (script_words.palette_demo). Returns the verdict, or "" until both lanes have run.
export function verdict({ main, worker }, text) {
  if (!main || !worker) return "";
  if (main.maxEdge !== worker.maxEdge) return text.verdictMixed;
  const values = {
    main: numbers.milliseconds(main.longestFrame),
    worker: numbers.milliseconds(worker.longestFrame),
    limit: numbers.milliseconds(SLOW_FRAME_MS),
  };
  const mainSlow = main.longestFrame > SLOW_FRAME_MS;
  const workerSlow = worker.longestFrame > SLOW_FRAME_MS;
  let sentence;
  let suggest = false;
  if (!mainSlow && !workerSlow) {
    sentence = format(text.verdictNeither, values);
    suggest = true;
  } else if (farLonger(main.longestFrame, worker.longestFrame)) {
    if (workerSlow) {
      const ratio = Math.round(main.longestFrame / worker.longestFrame);
      const template = numbers.plural(text.verdictWorkerSmoother, ratio);
      sentence = format(template, { ...values, ratio: numbers.count(ratio) });
    } else sentence = format(text.verdictMainSlow, values);
  } else if (farLonger(worker.longestFrame, main.longestFrame)) {
    sentence = format(text.verdictWorkerSlow, values);
  } else if (mainSlow && workerSlow) {
    if (aboutTheSame(main.longestFrame, worker.longestFrame)) {
      sentence = format(text.verdictBothSlow, values);
    } else if (main.longestFrame > worker.longestFrame) {
      sentence = format(text.verdictBothSlowMainLonger, values);
    } else sentence = format(text.verdictBothSlowWorkerLonger, values);
  } else {
    sentence = format(text.verdictClose, values);
    suggest = true;
  }
  if (suggest && main.maxEdge !== 0) sentence += ` ${text.tryFullResolution}`;
  return sentence;
}
