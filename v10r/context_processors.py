from __future__ import annotations

from django.conf import settings
from django.urls import translate_url
from django.utils.translation import get_language, get_language_info


def languages(request):
    """Offer this page in every language, as links (no JavaScript, no POST needed)."""
    current = get_language()
    path = request.get_full_path()
    return {
        "language_links": [
            {
                "code": code,
                "name": get_language_info(code)["name_local"],
                "url": translate_url(path, code),
                "current": code == current,
            }
            for code, _name in settings.LANGUAGES
        ]
    }
