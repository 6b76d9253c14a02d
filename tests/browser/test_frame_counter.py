"""The indicator's frame counter in words for its number, in the page's language: plural forms
come from the catalogue (ngettext), and the browser's Intl.PluralRules picks among them."""

from __future__ import annotations

import pytest
from django.utils import translation
from django.utils.translation import ngettext

from tests.browser.conftest import csp_violations
from tests.browser.test_workers_page import PAGE, open_demo

pytestmark = pytest.mark.browser

PREFIX = {"en": "", "ru": "/ru", "de": "/de"}

# The page's own numbers.plural() and numbers.count() on its own messages, for any count:
# [the form chosen, the sentence shown].
SAY_FRAMES = """async (counts) => {
    const url = performance.getEntriesByType("resource")
        .map((entry) => entry.name)
        .find((name) => /\\/showcases\\/numbers\\.[^/]*js$/.test(name));
    const numbers = await import(url);
    const text = JSON.parse(document.getElementById("palette-demo-messages").textContent);
    return counts.map((n) => {
        const form = numbers.plural(text.framesDrawn, n);
        return [form, form.replace("{count}", numbers.count(n))];
    });
}"""


def say_frames(page, counts: list[int]) -> list[str]:
    return [" ".join(said.split()) for _, said in page.evaluate(SAY_FRAMES, counts)]


def frame_forms(page, counts: list[int]) -> list[str]:
    return [form for form, _ in page.evaluate(SAY_FRAMES, counts)]


@pytest.mark.parametrize(
    ("language", "counts", "said"),
    [
        (
            "ru",
            [1, 2, 5, 11, 21, 22, 25, 172],
            [
                "Отрисован 1 кадр",
                "Отрисовано 2 кадра",
                "Отрисовано 5 кадров",
                "Отрисовано 11 кадров",
                "Отрисован 21 кадр",
                "Отрисовано 22 кадра",
                "Отрисовано 25 кадров",
                "Отрисовано 172 кадра",
            ],
        ),
        ("de", [1, 2], ["1 Frame gezeichnet", "2 Frames gezeichnet"]),
        ("en", [1, 2], ["1 frame drawn", "2 frames drawn"]),
    ],
)
def test_the_frame_counter_takes_the_plural_form_of_its_number(site, page, language, counts, said):
    open_demo(page, site, PREFIX[language] + PAGE)
    assert say_frames(page, counts) == said
    assert csp_violations(page) == []


@pytest.mark.parametrize("language", ["en", "ru", "de"])
def test_the_browsers_plural_rule_picks_the_form_gettext_picks_for_every_count(
    site, page, language
):
    # CLDR (in the browser) and the catalogue's Plural-Forms (on the server) must agree on
    # which form each whole number takes.
    counts = [*range(0, 230), 1001, 1002, 1005, 1011, 1021, 3600]
    open_demo(page, site, PREFIX[language] + PAGE)
    with translation.override(language):
        expected = [ngettext("{count} frame drawn", "{count} frames drawn", n) for n in counts]
    assert frame_forms(page, counts) == expected


def test_the_live_counter_in_russian_agrees_with_its_own_number(site, page):
    open_demo(page, site, "/ru" + PAGE)
    page.wait_for_function(
        "() => Number(document.querySelector('[data-frames]').dataset.count) > 30"
    )
    count, shown = page.evaluate(
        """() => {
            const counter = document.querySelector('[data-frames]');
            return [Number(counter.dataset.count), counter.textContent];
        }"""
    )
    with translation.override("ru"):
        expected = ngettext("{count} frame drawn", "{count} frames drawn", count)
    assert " ".join(shown.split()) == expected.replace("{count}", f"{count:,}".replace(",", " "))
