"""The dashboard's hourly chart, drawn by Chromium in every language: bars with real geometry
(a localised coordinate, "660,0", draws nothing), and a count axis level with its grid lines."""

from __future__ import annotations

import pytest

from notifications import outbox
from tests.browser.conftest import csp_violations, log_in
from tests.helpers import make_deliveries, mark_failed, mark_sent

pytestmark = pytest.mark.browser

BARS = """() => [...document.querySelectorAll(".hourly .chart > svg rect")].map((rect) => {
  const box = rect.getBoundingClientRect();
  return {outcome: rect.getAttribute("class"), width: box.width, height: box.height,
          x: rect.x.baseVal.value, y: rect.y.baseVal.value};
})"""

# Each tick label's vertical middle and its grid line's, in page pixels.
TICKS = """() => {
  const labels = [...document.querySelectorAll(".value-axis .tick")];
  const lines = [...document.querySelectorAll(".hourly .gridline")];
  return labels.map((label, i) => {
    const box = label.getBoundingClientRect(), line = lines[i].getBoundingClientRect();
    return {text: label.textContent, label: box.top + box.height / 2, line: line.top,
            top: box.top, bottom: box.bottom, svgTop: lines[0].getBoundingClientRect().top,
            svgBottom: lines[lines.length - 1].getBoundingClientRect().top};
  });
}"""


@pytest.mark.parametrize(
    ("language", "middle"), [("", "1.5"), ("/ru", "1,5"), ("/de", "1,5")], ids=["en", "ru", "de"]
)
def test_the_hourly_chart_draws_its_bars_and_scale_in_every_language(
    site, page, django_user_model, language, middle
):
    recipient = django_user_model.objects.create_user("reader", email="reader@example.com")
    ids = make_deliveries(recipient, 3)
    claims = {c.id: c for c in outbox.claim(batch_size=3)}
    for delivery_id in ids[:2]:
        mark_sent(claims[delivery_id], provider_message_id="m")
    mark_failed(claims[ids[2]], code="BAD_ADDRESS", message="x", retryable=False)
    django_user_model.objects.create_superuser("boss", "boss@example.com", "a-long-password-1")
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_viewport_size({"width": 1280, "height": 900})
    log_in(page, site, username="boss", password="a-long-password-1")
    page.goto(f"{site.url}{language}/admin/")
    page.wait_for_load_state("networkidle")
    bars = page.evaluate(BARS)
    assert [bar["outcome"] for bar in bars] == ["bar-sent", "bar-failed"]
    for bar in bars:
        assert bar["width"] > 5 and bar["height"] > 5, bars
    # Stacked: the failed third sits on the sent two thirds, at the bar's place in the hour.
    sent, failed = bars
    assert sent["height"] == pytest.approx(2 * failed["height"], rel=0.02)
    assert sent["x"] == failed["x"] > 600
    ticks = page.evaluate(TICKS)
    assert [t["text"] for t in ticks] == ["3", middle, "0"]
    middle_tick = ticks[1]
    assert abs(middle_tick["label"] - middle_tick["line"]) < 4, ticks
    for tick in ticks:
        assert tick["top"] >= tick["svgTop"] - 8 and tick["bottom"] <= tick["svgBottom"] + 8
    assert errors == []
    assert csp_violations(page) == []
