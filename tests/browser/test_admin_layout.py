"""The staff console's layout, measured in Chromium from a phone (390 px) to a desktop (1280,
1440 px), light and dark, in English and Russian (whose words are longer): nothing wider than
the window, Retry and Run now in view, no word broken in two, and the chart's hour labels
readable.

Each test saves a screenshot in its tmp_path, so a failing run can be looked at.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from jobs import registry
from notifications.models import NotificationDelivery
from tests.browser.conftest import log_in
from tests.helpers import finish, make_deliveries, make_timed_run

pytestmark = pytest.mark.browser

# Every element whose right edge is past the window and that no scrolling or clipping box
# holds: what makes the page scroll sideways, or what is cut off by the window's edge.
OVERFLOWING = """() => {
  const held = (element) => {
    for (let box = element.parentElement; box && box !== document.body; box = box.parentElement) {
      if (/auto|scroll|hidden|clip/.test(getComputedStyle(box).overflowX)) return true;
    }
    return false;
  };
  const name = (element) => element.tagName.toLowerCase() + (element.id ? "#" + element.id : "")
    + [...element.classList].map((c) => "." + c).join("");
  const found = [];
  for (const element of document.body.querySelectorAll("*")) {
    const box = element.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) continue;
    if (box.right > window.innerWidth + 0.5 && !held(element)) {
      const path = [];
      for (let e = element; e && e !== document.body; e = e.parentElement) path.unshift(name(e));
      found.push(`${path.slice(-4).join(" > ")}: right edge at ${Math.round(box.right)} px`);
    }
  }
  return found;
}"""

# Words laid out on two lines (a word broken inside itself), among the text under selector;
# elements matching allowed (the long codes) may break. A hyphen is a place a line may end
# ("демо-" / "строки"), so the parts of a hyphenated word are words of their own.
BROKEN_WORDS = """([selector, allowed]) => {
  const broken = [];
  for (const root of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (allowed && node.parentElement.closest(allowed)) continue;
      if (node.parentElement.closest(".visually-hidden")) continue;  // a 1 px box, by design
      for (const match of node.data.matchAll(/[^\\s-]+/g)) {
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const lines = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
        if (lines.size > 1) broken.push(match[0]);
      }
    }
  }
  return broken;
}"""

LAYOUTS = [
    pytest.param(390, "light", id="390-light"),
    pytest.param(390, "dark", id="390-dark"),
    pytest.param(1280, "light", id="1280-light"),
    pytest.param(1280, "dark", id="1280-dark"),
    pytest.param(1440, "light", id="1440-light"),
]
LANGUAGES = [pytest.param("", id="en"), pytest.param("/ru", id="ru")]


@pytest.fixture
def fixer(django_user_model):
    """Three dead rows carrying what real ones do (a provider's long error), and a staff
    member who may retry them."""
    recipient = django_user_model.objects.create_user("reader", email="reader@example.com")
    ids = make_deliveries(recipient, 3, channel="email")
    finish(ids, status="dead")
    NotificationDelivery.objects.filter(pk__in=ids).update(
        error_code="SMTP_UNAVAILABLE_AFTER_RETRIES",
        error_message="Connection unexpectedly closed: " + "x" * 300,
    )
    member = django_user_model.objects.create_user(
        "fixer", password="a-long-password-1", is_staff=True
    )
    for codename in ("view_needsattention", "view_notificationdelivery", "retry_delivery"):
        member.user_permissions.add(Permission.objects.get(codename=codename))
    return member


def open_as_fixer(page, site, *, width: int, scheme: str, path: str) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    page.emulate_media(color_scheme=scheme)
    log_in(page, site, username="fixer", password="a-long-password-1")
    page.goto(site.url + path)
    page.wait_for_load_state("networkidle")


def assert_fits_the_window(page) -> None:
    assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth"), (
        page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
    )
    assert page.evaluate(OVERFLOWING) == []


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize(("width", "scheme"), LAYOUTS)
def test_retry_is_in_view_and_nothing_is_wider_than_the_window(
    site, page, fixer, tmp_path, width, scheme, language
):
    open_as_fixer(
        page,
        site,
        width=width,
        scheme=scheme,
        path=f"{language}/admin/notifications/needsattention/",
    )
    page.screenshot(path=tmp_path / f"needs-attention-{width}-{scheme}.png", full_page=True)
    button = page.locator("#result_list .retry-button").first
    # Scroll the window down to the row (never sideways), and measure where Retry is drawn.
    page.evaluate(
        "(b) => window.scrollTo(0, b.getBoundingClientRect().top + window.scrollY - 200)",
        button.element_handle(),
    )
    box = button.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width, box
    assert box["height"] >= 24 and box["width"] >= 44, box  # a target a hand can hit
    # Drawn there, not clipped away by the list's own scrolling box or covered.
    centre = (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    assert page.evaluate(
        "([x, y]) => !!document.elementFromPoint(x, y)?.closest('.retry-button')", centre
    )
    assert_fits_the_window(page)
    # Words stay whole; only the long codes and titles may break inside one.
    assert page.evaluate(BROKEN_WORDS, ["#result_list", ".field-error_code, .field-title"]) == []
    if width >= 1280:
        # At desktop widths the list does not scroll inside its own box either.
        assert page.evaluate(
            "[...document.querySelectorAll('#result_list')].every("
            "t => t.getBoundingClientRect().right <= window.innerWidth "
            "&& t.scrollWidth <= t.parentElement.clientWidth + 1)"
        )


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize(("width", "scheme"), LAYOUTS)
def test_the_dashboard_fits_the_window(site, page, fixer, tmp_path, width, scheme, language):
    open_as_fixer(page, site, width=width, scheme=scheme, path=f"{language}/admin/")
    page.screenshot(path=tmp_path / f"dashboard-{width}-{scheme}.png", full_page=True)
    assert page.locator(".queue-dashboard").is_visible()
    assert_fits_the_window(page)
    assert page.evaluate(BROKEN_WORDS, [".queue-dashboard", None]) == []
    # A channel's health is in view without scrolling its table sideways.
    health = page.locator(".channel-health [data-health]").first.bounding_box()
    assert health["x"] >= 0 and health["x"] + health["width"] <= width, health


# The rendered height of each hour label's text: its glyphs' box, as drawn, whatever scaling
# the chart gets. Also where each label starts, and where its bar starts (the label for hour
# 3·i sits under bar 3·i: the bar's x in the SVG, scaled to the drawn chart).
HOUR_LABELS = """() => {
  const svg = document.querySelector(".hourly svg");
  const chart = svg.getBoundingClientRect();
  const scale = chart.width / svg.viewBox.baseVal.width;
  return [...document.querySelectorAll(".hourly .hour-label")].map((label, i) => {
    const range = document.createRange();
    range.selectNodeContents(label);
    const text = range.getBoundingClientRect();
    return {text: label.textContent.trim(), height: text.height, left: text.left,
            bar: chart.left + i * 3 * (svg.viewBox.baseVal.width / 24) * scale};
  });
}"""


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("width", [1280, 390])
def test_the_charts_hour_labels_are_readable_and_under_their_bars(
    site, page, fixer, tmp_path, width, language
):
    open_as_fixer(page, site, width=width, scheme="light", path=f"{language}/admin/")
    page.locator(".hourly").screenshot(path=tmp_path / f"chart-{width}.png")
    labels = page.evaluate(HOUR_LABELS)
    assert len(labels) == 8  # every third of 24 hours
    assert all(label["text"].isdigit() and len(label["text"]) == 2 for label in labels), labels
    assert min(label["height"] for label in labels) >= 11, labels
    assert all(abs(label["left"] - label["bar"]) <= 3 for label in labels), labels


# Each cell of the health table whose text is wider than the cell shows it: the text cut off
# by the cell's edge or its box, or the table wider than the box that holds it.
CLIPPED_CELLS = """() => {
  const clipped = [];
  for (const cell of document.querySelectorAll(".channel-health th, .channel-health td")) {
    const range = document.createRange();
    range.selectNodeContents(cell);
    const text = range.getBoundingClientRect(), box = cell.getBoundingClientRect();
    if (text.right > box.right + 0.5 || text.left < box.left - 0.5
        || cell.scrollWidth > cell.clientWidth + 1) {
      clipped.push(cell.textContent.trim());
    }
  }
  return clipped;
}"""

SCROLL_BOX = """() => {
  const box = document.querySelector(".queue-dashboard .table-scroll");
  const style = getComputedStyle(box);
  return {scrolls: box.scrollWidth > box.clientWidth + 1, background: style.backgroundImage,
          attachment: style.backgroundAttachment, tabindex: box.getAttribute("tabindex"),
          label: box.getAttribute("aria-label") || document.getElementById(
            box.getAttribute("aria-labelledby"))?.textContent || ""};
}"""


@pytest.mark.parametrize("language", [*LANGUAGES, pytest.param("/de", id="de")])
def test_the_health_table_shows_every_word_whole_at_desktop_width(
    site, page, fixer, tmp_path, language
):
    open_as_fixer(page, site, width=1280, scheme="light", path=f"{language}/admin/")
    page.locator(".channel-health").screenshot(path=tmp_path / "health-1280.png")
    assert page.evaluate(CLIPPED_CELLS) == []
    assert page.evaluate(BROKEN_WORDS, [".channel-health", None]) == []
    assert page.evaluate(SCROLL_BOX)["scrolls"] is False


@pytest.mark.parametrize("language", [*LANGUAGES, pytest.param("/de", id="de")])
def test_the_health_table_says_it_scrolls_on_a_phone(site, page, fixer, tmp_path, language):
    open_as_fixer(page, site, width=390, scheme="light", path=f"{language}/admin/")
    page.locator(".queue-dashboard .table-scroll").screenshot(path=tmp_path / "health-390.png")
    box = page.evaluate(SCROLL_BOX)
    assert box["scrolls"] is True  # too wide for a phone: it scrolls in its own box
    # A shade at the edge that has more to show (drawn by the background, so it moves away as
    # the table is scrolled to that end), and a box a keyboard can scroll, named for it.
    assert box["background"].count("gradient") >= 2 and "local" in box["attachment"], box
    assert box["tabindex"] == "0" and box["label"], box
    start = edge_shades(page, tmp_path / "start.png")
    page.evaluate("document.querySelector('.queue-dashboard .table-scroll').scrollLeft = 1e6")
    end = edge_shades(page, tmp_path / "end.png")
    # Darker at the right edge while there is more to the right, at the left once scrolled.
    assert end["right"] - start["right"] > 8 and start["left"] - end["left"] > 8, (start, end)


def edge_shades(page, path) -> dict[str, float]:
    """The mean brightness (0-255) of the scrolling box's outermost 6 px on each side."""
    from PIL import Image, ImageStat

    page.locator(".queue-dashboard .table-scroll").screenshot(path=path)
    image = Image.open(path).convert("L")
    width, height = image.size
    left = ImageStat.Stat(image.crop((0, 0, 6, height))).mean[0]
    right = ImageStat.Stat(image.crop((width - 6, 0, width, height))).mean[0]
    return {"left": left, "right": right}


@pytest.fixture
def scheduler(django_user_model):
    """A staff member who may see the jobs page and run its jobs (so it has all its columns),
    and a run in the log (so a job has a last run to show)."""
    make_timed_run()
    member = django_user_model.objects.create_user(
        "scheduler", password="a-long-password-1", is_staff=True
    )
    for codename in ("view_jobrun", "run_job"):
        member.user_permissions.add(Permission.objects.get(codename=codename))
    return member


@pytest.mark.parametrize("language", [*LANGUAGES, pytest.param("/de", id="de")])
@pytest.mark.parametrize(("width", "scheme"), LAYOUTS[:3])
def test_the_jobs_page_fits_the_window_with_run_now_in_view(
    site, page, scheduler, tmp_path, width, scheme, language
):
    page.set_viewport_size({"width": width, "height": 900})
    page.emulate_media(color_scheme=scheme)
    log_in(page, site, username="scheduler", password="a-long-password-1")
    page.goto(f"{site.url}{language}/admin/jobs/jobrun/schedule/")
    page.screenshot(path=tmp_path / f"jobs-{width}-{scheme}.png", full_page=True)
    assert page.locator("#jobs tbody tr").count() == len(registry.jobs())
    # No sideways scroll: the page is no wider than the window, and nothing sticks out of it.
    assert_fits_the_window(page)
    # Words stay whole; only the slugs and cron expressions (code) may break inside one.
    assert page.evaluate(BROKEN_WORDS, ["#jobs", "code"]) == []
    for button in page.locator("#jobs button").all():
        box = button.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, box
    if width < 768:
        # Each value is shown under its column's heading, since the table's own are hidden.
        labels = page.evaluate(
            "[...document.querySelectorAll('#jobs td[data-label]')].map("
            "td => getComputedStyle(td, '::before').content)"
        )
        assert labels and all(label not in {"none", '""'} for label in labels), labels
