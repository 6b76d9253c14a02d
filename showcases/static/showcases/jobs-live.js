// The live log on /showcases/jobs/: polled while the browser is online, as the workers page's
// live queue is (live-fragment.js), and "Run the demo job" answered with the log itself; a
// refused run (the rate limit) is the log with its reason out of band, marked X-Jobs-Fragment.

import { keepLive } from "./live-fragment.js";

const text = JSON.parse(document.getElementById("job-log-messages").textContent);

keepLive({
  id: "job-log",
  note: document.querySelector("[data-log-note]"),
  text,
  header: "X-Jobs-Fragment",
  action: {
    selector: ".run-demo",
    offline: text.runOffline,
    unreachable: text.runUnreachable,
    box: "demo-error",
  },
});
