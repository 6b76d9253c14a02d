"""A count's words in the browser: ngettext's words for each plural category of the active
language, for a script that names a count's category with Intl.PluralRules.

The catalogue keeps the words, CLDR the rule; PLURAL_SAMPLES holds, for each language, one
whole number from every category CLDR gives to numbers in it. Russian's "other" is for
fractions ("1,5 кадра"), which take the same form as two."""

from __future__ import annotations

from collections.abc import Callable

from django.utils.translation import get_language

PLURAL_SAMPLES = {
    "en": {"one": 1, "other": 2},
    "de": {"one": 1, "other": 2},
    "ru": {"one": 1, "few": 2, "many": 5, "other": 2},
}


def forms(words: Callable[[int], str]) -> dict[str, str]:
    """words(n) is ngettext's sentence for n; return it for each plural category of the
    active language, keyed by category."""
    samples = PLURAL_SAMPLES.get(get_language(), PLURAL_SAMPLES["en"])
    return {category: words(number) for category, number in samples.items()}
