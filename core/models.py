from __future__ import annotations

from django.db import models


class RateLimitWindow(models.Model):
    """One fixed-window counter of core/ratelimit.py: a key's hits since window_start."""

    key = models.CharField(max_length=200, primary_key=True)
    window_start = models.DateTimeField()
    hits = models.PositiveIntegerField()

    class Meta:
        db_table = "v10r_rate_limit_windows"

    def __str__(self) -> str:
        return f"{self.key}: {self.hits}"
