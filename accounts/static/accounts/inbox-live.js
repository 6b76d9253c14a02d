// The inbox, live: the header's badge on every signed-in page, and new entries at the top of the
// inbox's first page, without a reload.
//
// It asks the inbox's state (accounts/inbox_views.py) every POLL_MS while the page is visible,
// with the last ETag, so an unchanged inbox costs a 304 and no body. When the newest entry
// changes, the inbox page fetches its first page of entries (the entries partial) and puts
// the ones it does not show yet at the top; what the reader already sees stays as it is. A 403
// means the session ended: it stops. A 429 (the account's polls, or the site's, over their
// limit) waits as long as its Retry-After says. Any other failure waits longer before the next try.

const POLL_MS = 1500;
const LONGEST_WAIT_MS = 30000;

const link = document.querySelector("[data-inbox-link][data-state-url]");
// Looked up each time: "Mark all read" swaps the whole region, list and all.
const liveList = () => document.querySelector("[data-inbox-live][data-fragment-url]");

let etag = null;
let newest = liveList() ? newestShown(liveList()) : undefined;
let timer = null;
let failures = 0;
let retryAfterMs = 0;
let stopped = false;
let inFlight = false;

// A cursor ("micros.hex", notifications/inbox.py) as something that sorts as the inbox does.
function key(cursor) {
  const [micros, hex] = String(cursor).split(".");
  return [BigInt(micros || "0"), hex || ""];
}

function newer(a, b) {
  const [ma, ha] = key(a);
  const [mb, hb] = key(b);
  return ma > mb || (ma === mb && ha > hb);
}

function newestShown(list) {
  const first = list.querySelector("[data-cursor]");
  return first ? first.dataset.cursor : null;
}

// The word after the count agrees with it ("1 непрочитанное", "5 непрочитанных"): the
// page carries the word for each plural category, and the browser names the count's.
function unreadWord(text, word) {
  const number = text.endsWith("+") ? Number.parseInt(text, 10) + 1 : Number(text);
  const category = new Intl.PluralRules(document.documentElement.lang).select(number);
  return ` ${word.dataset[category] ?? word.dataset.other}`;
}

function showBadge(text) {
  const badge = document.querySelector("[data-inbox-badge]");
  const count = badge && badge.querySelector("[data-inbox-count]");
  if (!count) return;
  if (count.textContent !== text) count.textContent = text;
  const word = badge.querySelector("[data-inbox-unread-word]");
  if (word && text) word.textContent = unreadWord(text, word);
  badge.hidden = text === "";
}

async function merge(list) {
  const response = await fetch(list.dataset.fragmentUrl, {
    cache: "no-store",
    credentials: "same-origin",
    headers: { Accept: "text/html" },
  });
  if (!response.ok) throw new Error(`entries: ${response.status}`);
  const html = await response.text();
  const parsed = new DOMParser().parseFromString(`<ol>${html}</ol>`, "text/html");
  const page = parsed.querySelector("ol");
  const entries = [...page.querySelectorAll("li[data-entry-id]")];
  const shown = newestShown(list);
  if (shown !== null && page.querySelector("[data-inbox-more]") &&
      !entries.some((item) => document.getElementById(item.id))) {
    // More arrived than a page holds (the tab was hidden a while): prepending this page would
    // leave out those between it and what is shown, and "Mark all read" would mark them
    // unseen. Show the first page afresh; its "Older" leads to the rest.
    list.replaceChildren(...[...page.children].map((node) => document.importNode(node, true)));
    if (window.htmx) window.htmx.process(list);
  } else {
    const fresh = entries.filter(
      (item) =>
        !document.getElementById(item.id) && (shown === null || newer(item.dataset.cursor, shown)),
    );
    if (fresh.length === 0) return;
    // Newest first, as the page lists them: insert in order before what was the first entry.
    const anchor = list.firstElementChild;
    for (const item of fresh) {
      const adopted = document.importNode(item, true);
      list.insertBefore(adopted, anchor);
      if (window.htmx) window.htmx.process(adopted);
    }
  }
  // "Mark all read" now reaches the newest entry the reader is shown.
  const through = document.querySelector("[data-inbox-through]");
  if (through) through.value = newestShown(list) || "";
  const readAll = document.querySelector("[data-inbox-read-all]");
  if (readAll) readAll.hidden = false;
  const empty = document.querySelector("[data-inbox-empty]");
  if (empty) empty.hidden = true;
}

async function poll() {
  timer = null;
  if (stopped || inFlight || document.hidden) return;
  inFlight = true;
  try {
    const headers = { Accept: "application/json" };
    if (etag) headers["If-None-Match"] = etag;
    const response = await fetch(link.dataset.stateUrl, {
      cache: "no-store",
      credentials: "same-origin",
      headers,
    });
    if (response.status === 403) {
      stopped = true;
      return;
    }
    if (response.status === 429) {
      retryAfterMs = Number(response.headers.get("Retry-After")) * 1000 || 0;
      throw new Error("state: 429");
    }
    if (response.status !== 304) {
      if (!response.ok) throw new Error(`state: ${response.status}`);
      const state = await response.json();
      showBadge(state.badge);
      const list = liveList();
      if (list && state.newest && state.newest !== newest) {
        await merge(list);
        newest = state.newest;
      }
      // Kept only now: had the merge failed, the next poll must not be answered 304.
      etag = response.headers.get("ETag") || null;
    }
    failures = 0;
  } catch {
    // The network or the server failed: try again, later each time.
    failures += 1;
  } finally {
    inFlight = false;
    schedule();
  }
}

function schedule() {
  if (stopped || document.hidden || timer !== null) return;
  const backoff = failures ? Math.min(POLL_MS * 2 ** failures, LONGEST_WAIT_MS) : POLL_MS;
  const wait = Math.max(backoff, retryAfterMs);
  retryAfterMs = 0;
  timer = setTimeout(poll, wait);
}

document.addEventListener("visibilitychange", () => {
  if (document.hidden) {
    clearTimeout(timer);
    timer = null;
  } else if (!stopped) {
    clearTimeout(timer);
    timer = null;
    poll();
  }
});

// An archived entry leaves the list (its answer is empty), and the focus with it: it goes to
// the entry that takes its place, so the keyboard's place stays in the list.
document.addEventListener("htmx:beforeSwap", (event) => {
  const gone = event.detail.target;
  if (!gone.matches?.("li[data-entry-id]") || !gone.contains(document.activeElement)) return;
  if (/data-entry-id/.test(event.detail.serverResponse || "")) return;
  const next = gone.nextElementSibling || gone.previousElementSibling;
  setTimeout(() => {
    const button = next && next.querySelector("button");
    const heading = document.querySelector("main h1");
    if (button) button.focus();
    else if (heading) {
      heading.tabIndex = -1;
      heading.focus();
    }
  }, 0);
});

if (link) schedule();
