// The preference centre's digests (accounts/preferences.html): each category's day and hour
// fields are shown only for the choices that use them (data-digest-for), and the note saying
// so is hidden, since the page now shows it. Without JavaScript all stay, and the server
// ignores what a choice does not use.
function show(row) {
  const cadence = row.querySelector("[data-digest-cadence]")?.value;
  for (const part of row.querySelectorAll("[data-digest-for]")) {
    part.hidden = !part.dataset.digestFor.split(" ").includes(cadence);
  }
  const note = row.querySelector("[data-digest-note]");
  if (note) note.hidden = true;
}

function showAll(root) {
  if (root.matches?.("[data-digest]")) show(root);
  for (const row of root.querySelectorAll?.("[data-digest]") ?? []) show(row);
}

document.addEventListener("change", (event) => {
  const row = event.target.closest?.("[data-digest]");
  if (row && event.target.matches("[data-digest-cadence]")) show(row);
});
// A section saved in place is new content: htmx announces it with htmx:load.
document.addEventListener("htmx:load", (event) => showAll(event.target));
showAll(document);
