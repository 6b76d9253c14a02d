// htmx leaves 4xx and 5xx answers unswapped, which would make a refused "Try it" silent. The
// server marks the refusals it renders as the live-queue fragment (a rate limit, a full demo
// queue) with an X-Queue-Fragment header; those are swapped in like any answer. An error page
// from a proxy in front of the site carries no such header and is still left alone.
document.addEventListener("htmx:beforeSwap", (event) => {
  if (event.detail.xhr.getResponseHeader("X-Queue-Fragment")) {
    event.detail.shouldSwap = true;
    event.detail.isError = false;
  }
});
