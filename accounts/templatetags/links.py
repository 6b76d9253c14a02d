"""{{ text|link_urls }}: a message's plain text, escaped, with its http and https URLs as links.

Not Django's urlize: that also links bare domains ("example.com") and email addresses, and a
message's text is not the place to guess at those. Here only an absolute http(s) URL becomes a
link, found in the raw text and escaped piece by piece, so no markup in the text survives and
no other scheme (javascript:, data:) can ever be an href."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString

register = template.Library()

# Up to the first space, angle bracket or quote: none of them may stand unescaped in a URL,
# and prose wraps URLs in them («…», “…”, <…>).
URL = re.compile(r"""https?://[^\s<>"'«»“”‘’]+""", re.IGNORECASE)
# Prose punctuation after a URL ends the sentence, not the URL.
TRAILING = ".,:;!?"


def _trimmed(url: str) -> str:
    """url without the sentence's punctuation after it, and without a closing parenthesis
    that closes the prose's "(see https://…)" rather than one of the URL's own."""
    while url and (url[-1] in TRAILING or (url[-1] == ")" and url.count(")") > url.count("("))):
        url = url[:-1]
    return url


@register.filter(is_safe=True)
def link_urls(text: str) -> SafeString:
    text = str(text)
    shown = SafeString("")
    done = 0
    for match in URL.finditer(text):
        url = _trimmed(match.group(0))
        try:
            host = urlsplit(url).hostname
        except ValueError:  # "http://[::1": no URL a browser would open
            continue
        if not host:
            continue
        start = match.start()
        shown += escape(text[done:start])
        shown += format_html('<a href="{}" rel="nofollow noopener">{}</a>', url, url)
        done = start + len(url)
    return shown + escape(text[done:])
