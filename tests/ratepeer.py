"""A loopback Telegram Bot API that limits our rate, as Telegram does for bulk sends.

It accepts at most `rate` sendMessage calls in any one second: a sliding window over the
sends it accepted (the strictest reading of "30 messages a second"; a token bucket would let
a second's worth through at once after a pause). Past that it answers 429 as Telegram does,
with Retry-After and parameters.retry_after in whole seconds: when the window next has room,
rounded up, at least 1. A 429 does not count against the window. bench/telegram_paced.py
runs it too.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque

from tests.httppeers import Reply, Request, TelegramPeer, json_reply


class RateLimitedTelegram(TelegramPeer):
    """TelegramPeer that allows rate sendMessage calls a second (0: none at all).

    retry_after, when given, is the wait every 429 asks for instead of the window's (a
    fraction of a second is allowed, in parameters.retry_after alone, as the header takes
    whole seconds): tests use it to see many 429s quickly."""

    def __init__(self, *, token: str, rate: int = 30, retry_after: float | None = None) -> None:
        self.rate = rate
        self.fixed_retry_after = retry_after
        self.window = 1.0
        self._recent: deque[float] = deque()  # monotonic times of the sends accepted
        self.accepted_at: list[float] = []
        self.throttled_at: list[float] = []
        self._wait = threading.local()
        super().__init__(token=token)

    def ok(self, request: Request) -> Reply:
        if not request.path.endswith("/sendMessage"):
            return super().ok(request)
        now = time.monotonic()
        with self.lock:
            while self._recent and self._recent[0] <= now - self.window:
                self._recent.popleft()
            if len(self._recent) >= self.rate:
                self.throttled_at.append(now)
                room = self._recent[0] + self.window - now if self._recent else self.window
                self._wait.seconds = room
                throttled = True
            else:
                self._recent.append(now)
                self.accepted_at.append(now)
                throttled = False
        return self.rate_limited(request) if throttled else super().ok(request)

    def rate_limited(self, request: Request) -> Reply:
        if self.fixed_retry_after is not None:
            return json_reply(
                429,
                {
                    "ok": False,
                    "error_code": 429,
                    "description": "Too Many Requests",
                    "parameters": {"retry_after": self.fixed_retry_after},
                },
            )
        seconds = max(1, math.ceil(getattr(self._wait, "seconds", 1.0)))
        return json_reply(
            429,
            {
                "ok": False,
                "error_code": 429,
                "description": f"Too Many Requests: retry after {seconds}",
                "parameters": {"retry_after": seconds},
            },
            {"Retry-After": str(seconds)},
        )

    def busiest_second(self) -> int:
        """The most sends accepted in any one-second window: never more than rate."""
        times = sorted(self.accepted_at)
        most, first = 0, 0
        for last, at in enumerate(times):
            while at - times[first] >= self.window:
                first += 1
            most = max(most, last - first + 1)
        return most

    def summary(self) -> dict:
        accepted = sorted(self.accepted_at)
        span = accepted[-1] - accepted[0] if len(accepted) > 1 else 0.0
        return {
            "accepted": len(accepted),
            "throttled": len(self.throttled_at),
            "span_seconds": span,
            "busiest_second": self.busiest_second(),
        }
