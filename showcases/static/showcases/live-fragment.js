// A server-rendered fragment kept live: polled every 2 s while the browser is online, and the
// button whose post answers with the fragment guarded while offline. The workers page's live
// queue (queue-live.js) and the jobs page's log (jobs-live.js) are two of them.
//
// Polled with fetch rather than htmx's "every 2s": htmx logs two console errors of its own
// for every request that fails, on top of the browser's one, and cannot be told to wait while
// the browser is offline. The answer is swapped in by htmx all the same.

const POLL_MS = 2000;
// Each failed poll doubles the wait before the next, up to a minute.
const MAX_POLL_MS = 60_000;

export const count = (value) =>
  new Intl.NumberFormat(document.documentElement.lang || undefined).format(value);

// id: the fragment's element, whose data-poll-url answers with it; note: where the page says
// why it is stale, in text.offline or text.unreachable ("{seconds}" to the next try);
// header: what the server marks the refusals it renders as the fragment with; action: the
// button's selector, the id of the box that says why a post did not go, its two sentences
// and onRefuse() to run before one is shown; onOnline: anything else to undo when the
// browser is back.
export function keepLive({ id, note, text, header, action, onOnline = () => {} }) {
  let delay = POLL_MS;
  let timer = null;
  // Bumped by every post of the button: a poll sent before it answers with what was before.
  let posts = 0;

  function say(message) {
    note.textContent = message;
    note.hidden = !message;
    document.getElementById(id)?.classList.toggle("stale", Boolean(message));
  }

  function schedule(ms) {
    clearTimeout(timer);
    timer = setTimeout(poll, ms);
  }

  async function poll() {
    clearTimeout(timer);
    const live = document.getElementById(id);
    if (!live) return;
    if (navigator.onLine === false) {
      // Nothing to ask until the browser says it is back ("online" below).
      say(text.offline);
      return;
    }
    const postsBefore = posts;
    let html = null;
    try {
      const response = await fetch(live.dataset.pollUrl, { headers: { "HX-Request": "true" } });
      if (response.ok) html = await response.text();
    } catch {
      // The browser has already logged the failed request; the note below says the rest.
    }
    if (html === null) {
      delay = Math.min(delay * 2, MAX_POLL_MS);
      say(
        navigator.onLine === false
          ? text.offline
          : text.unreachable.replace("{seconds}", count(delay / 1000)),
      );
      if (navigator.onLine !== false) schedule(delay);
      return;
    }
    delay = POLL_MS;
    if (postsBefore === posts && document.getElementById(id) === live) {
      htmx.swap(live, html, { swapStyle: "outerHTML" });
    }
    say("");
    schedule(delay);
  }

  window.addEventListener("offline", () => {
    clearTimeout(timer);
    say(text.offline);
  });
  window.addEventListener("online", () => {
    onOnline();
    delay = POLL_MS;
    poll();
  });

  // htmx leaves 4xx and 5xx answers unswapped, which would make a refused post silent. The
  // server marks the refusals it renders as the fragment (a rate limit, say) with header;
  // those are swapped in like any answer. An error page from a proxy in front of the site
  // carries no such header and is still left alone.
  document.addEventListener("htmx:beforeSwap", (event) => {
    if (event.detail.xhr.getResponseHeader(header)) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  function refuse(message) {
    action.onRefuse?.();
    const box = document.getElementById(action.box);
    box.textContent = message;
    box.hidden = false;
  }

  const isAction = (event) => Boolean(event.detail.elt.matches?.(action.selector));
  document.addEventListener("htmx:beforeRequest", (event) => {
    if (!isAction(event)) return;
    // Offline the post cannot get through: say so rather than fail in the console.
    if (navigator.onLine === false) {
      event.preventDefault();
      refuse(action.offline);
      return;
    }
    posts += 1;
  });
  document.addEventListener("htmx:sendError", (event) => {
    if (isAction(event)) {
      refuse(navigator.onLine === false ? action.offline : action.unreachable);
    }
  });

  schedule(POLL_MS);
}
