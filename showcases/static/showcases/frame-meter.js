// How smooth the page is: a dot that travels while frames are drawn (a frame counter for
// those who asked for less motion), and the longest gap between frames while some work runs.
// Both stand still while the main thread is blocked; that is the point of them.

const reducedMotion = window.matchMedia("(prefers-reduced-motion: reduce)");

let lastFrame = performance.now();
let longestFrame = 0;

// pulse: the travelling dot; showFrames(count): shows the frames drawn so far, in words.
export function startIndicator({ pulse, showFrames }) {
  let travel = 0;
  const measureTravel = () => {
    travel = pulse.parentElement.clientWidth - pulse.offsetWidth - 24;
  };
  new ResizeObserver(measureTravel).observe(pulse.parentElement);
  let frameCount = 0;

  function onFrame() {
    const now = performance.now();
    longestFrame = Math.max(longestFrame, now - lastFrame);
    lastFrame = now;
    frameCount += 1;
    showFrames(frameCount);
    if (!reducedMotion.matches) {
      const phase = (now / 1200) % 2;
      const position = phase < 1 ? phase : 2 - phase;
      pulse.style.transform = `translateX(${(position * travel).toFixed(1)}px)`;
    }
    requestAnimationFrame(onFrame);
  }
  requestAnimationFrame(onFrame);
}

const nextFrame = () => new Promise((resolve) => requestAnimationFrame(resolve));

// Run work and measure the longest gap between frames meanwhile, the way a visitor feels it.
// A stall that ends with the work is counted when the work returns (the time since the last
// frame), because the frame that follows it may be dispatched after this code resumes.
export async function measured(work) {
  await nextFrame();
  longestFrame = 0;
  lastFrame = performance.now();
  const result = await work();
  const stalledUntilNow = performance.now() - lastFrame;
  await nextFrame();
  await nextFrame();
  return { result, longestFrame: Math.max(longestFrame, stalledUntilNow) };
}
