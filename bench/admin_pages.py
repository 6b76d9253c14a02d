"""Admin page timings with 1,000,000 deliveries in the table (target: each ≤ 300 ms).

The rows are spread over 30 days and 1,000 recipients: 95 % sent, 2 % failed, 1 % dead,
1 % retrying, 1 % due. Each page is fetched through Django's full stack (middleware, templates,
a logged-in superuser) in this process; the figure is the median of --runs fetches after one
warm-up.

    make bench        # or: .venv/bin/python bench/admin_pages.py [--rows N] [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import psycopg

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from bench import database  # noqa: E402

TARGET_MS = 300
BASE = "/admin/notifications"
# The staff console's lists, timed here and by claim_latency.py (against its plain indexes).
LISTS = {
    "admin index + queue dashboard": "/admin/",
    "deliveries": f"{BASE}/notificationdelivery/",
    "deliveries, status = retrying": f"{BASE}/notificationdelivery/?status=retrying",
    "needs attention": f"{BASE}/needsattention/",
    "failed deliveries": f"{BASE}/faileddelivery/",
    "notifications": f"{BASE}/notification/",
}

FILL_SQL = """
WITH people AS (
    INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email,
                           is_staff, is_active, date_joined)
    SELECT '!', false, 'reader-' || n, '', '', 'reader-' || n || '@example.com', false, true,
           now()
    FROM generate_series(1, 1000) AS n
    RETURNING id
),
numbered AS (
    SELECT id, row_number() OVER () AS n FROM people
),
made AS (
    INSERT INTO notifications.notifications (id, user_id, type, message_key, message_params,
                                             action_url, created_at)
    SELECT gen_random_uuid(), numbered.id, 'bench', 'queue.demo', '{"label": "bench"}', '',
           now() - random() * interval '30 days'
    FROM generate_series(1, %(rows)s) AS g
    JOIN numbered ON numbered.n = 1 + g %% 1000
    RETURNING id, created_at
)
INSERT INTO notifications.notification_deliveries
    (notification_id, channel, status, attempts, next_attempt_at, attempted_at, sent_at,
     error_code, error_message, created_at)
SELECT id,
       CASE WHEN r < 0.7 THEN 'email' ELSE 'demo' END,
       CASE WHEN r2 < 0.95 THEN 'sent' WHEN r2 < 0.97 THEN 'failed' WHEN r2 < 0.98 THEN 'dead'
            ELSE 'pending' END,
       CASE WHEN r2 < 0.95 THEN 1 WHEN r2 < 0.97 THEN 1 WHEN r2 < 0.98 THEN 5
            WHEN r2 < 0.99 THEN 2 ELSE 0 END,
       CASE WHEN r2 >= 0.98 AND r2 < 0.99 THEN now() + interval '10 minutes'
            ELSE created_at END,
       CASE WHEN r2 < 0.99 THEN created_at + interval '2 seconds' END,
       CASE WHEN r2 < 0.95 THEN created_at + interval '2 seconds' END,
       CASE WHEN r2 >= 0.95 AND r2 < 0.97 THEN 'BAD_ADDRESS'
            WHEN r2 >= 0.97 AND r2 < 0.99 THEN 'UPSTREAM_503' ELSE '' END,
       CASE WHEN r2 >= 0.95 AND r2 < 0.99 THEN 'bench' ELSE '' END,
       created_at
FROM (SELECT id, created_at, random() AS r, random() AS r2 FROM made) AS m
"""


def fill(url: str, rows: int) -> None:
    with psycopg.connect(url, autocommit=True) as db:
        db.execute(FILL_SQL, {"rows": rows})
        db.execute("VACUUM ANALYZE")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--reuse", action="store_true", help="keep v10r_bench's rows from an earlier run"
    )
    args = parser.parse_args()
    if args.rows < 1 or args.runs < 1:
        parser.error("--rows and --runs must be at least 1")

    url = database.server_url()
    if args.reuse:
        database.migrate(url)
    else:
        print(f"filling {args.rows:,} deliveries…", file=sys.stderr)
        database.prepare_database(url)
        started = time.perf_counter()
        fill(url, args.rows)
        print(f"filled in {time.perf_counter() - started:.0f} s", file=sys.stderr)

    database.set_up_django(url)
    from notifications.models import Notification, NotificationDelivery

    client = database.admin_client()
    delivery = NotificationDelivery.objects.order_by("-id").first()
    notification = Notification.objects.get(pk=delivery.notification_id)

    pages = {
        **LISTS,
        "deliveries, status = pending": f"{BASE}/notificationdelivery/?status=pending",
        "deliveries, channel = email": f"{BASE}/notificationdelivery/?channel=email",
        "deliveries, search by recipient": f"{BASE}/notificationdelivery/?q=reader-7%40example.com",
        "deliveries, search by error code": f"{BASE}/notificationdelivery/?q=UPSTREAM_503",
        "delivery detail": f"{BASE}/notificationdelivery/{delivery.pk}/change/",
        "notification detail (deliveries inline)": f"{BASE}/notification/{notification.pk}/change/",
        "deliveries in Russian": f"/ru{BASE}/notificationdelivery/",
        # Not the admin: the public page's live queue, which every visitor polls every 2 s.
        "public queue poll (/showcases/workers/queue/)": "/showcases/workers/queue/",
        "public workers page": "/showcases/workers/",
    }
    print(f"\nAdmin pages with {args.rows:,} deliveries, medians of {args.runs}\n")
    print("| page | ms | ≤ 300 ms |")
    print("| --- | ---: | :---: |")
    for name, path in pages.items():
        response = client.get(path)
        if response.status_code != 200:
            raise RuntimeError(f"{path} answered {response.status_code}")
        samples = []
        for _ in range(args.runs):
            began = time.perf_counter()
            client.get(path)
            samples.append((time.perf_counter() - began) * 1000)
        median = statistics.median(samples)
        print(f"| {name} | {median:.0f} | {'yes' if median <= TARGET_MS else 'NO'} |")


if __name__ == "__main__":
    main()
