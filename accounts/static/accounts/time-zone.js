// The preference centre's time zone: when the user has saved none, the server marks the field
// (data-prefill-time-zone) and this fills in the browser's own zone, an IANA name, and says so.
// Nothing is stored until the user saves; without JavaScript the field keeps UTC.
const field = document.querySelector("input[data-prefill-time-zone]");
const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
if (field && zone && zone !== field.value) {
  field.value = zone;
  const note = field.closest("div")?.querySelector("[data-time-zone-note]");
  if (note) note.hidden = false;
}
