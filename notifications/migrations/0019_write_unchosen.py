"""notifications.write_unchosen(): the single send's write, as a function of the database.

send_notification() decides a send as for a recipient who chose nothing, then writes it with
one statement that checks, as it writes, that they did not (notifications/enqueue.py says
which choices count). As a plain statement, the server parsed and planned it on every send:
half the database's CPU of a send whose two INSERTs take a tenth of a millisecond each. A
PL/pgSQL function keeps its statements' plans for the session, so the send pays for a call
whose plan is trivial, whatever the connection: direct, or through PgBouncer in transaction
pooling, where prepared statements are not kept.

It returns the notification's created_at, or NULL when the recipient did choose something that
counts, and it then writes nothing. now() is the caller's (the function sets no search_path),
as in every statement of the queue.
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION notifications.write_unchosen(
    p_id uuid,
    p_user integer,
    p_kind text,
    p_params jsonb,
    p_action_url text,
    p_cancel_key text,
    p_category text,
    p_names text[],
    p_digests boolean,
    p_quiet boolean,
    p_always boolean,
    p_lane text,
    p_when timestamptz,
    p_rows jsonb
) RETURNS timestamptz
LANGUAGE plpgsql
AS $function$
DECLARE
    made_at timestamptz;
BEGIN
    WITH made AS (
        INSERT INTO notifications.notifications
            (id, user_id, type, message_key, message_params, action_url, cancel_key)
        SELECT p_id, p_user, p_kind, p_kind, p_params, p_action_url, p_cancel_key
        WHERE NOT EXISTS (
            SELECT FROM notifications.channel_preferences AS p
            WHERE p.user_id = p_user
              AND p.category = p_category
              AND p.channel = ANY(p_names)
        )
        AND NOT (p_digests AND EXISTS (
            SELECT FROM notifications.digest_choices AS g
            WHERE g.user_id = p_user AND g.category = p_category
        ))
        AND NOT (p_quiet AND EXISTS (
            SELECT FROM notifications.recipients AS r
            WHERE r.user_id = p_user
              AND r.quiet_start IS NOT NULL
              AND (p_always OR r.quiet_email)
        ))
        RETURNING id, created_at
    ), written AS (
        INSERT INTO notifications.notification_deliveries
            (notification_id, channel, lane, status, skip_reason, decided_version,
             next_attempt_at)
        SELECT made.id, d.channel, p_lane, d.status, d.skip_reason,
               coalesce(
                   (SELECT v.version FROM notifications.choices_versions AS v
                    WHERE v.user_id = p_user),
                   0
               ),
               CASE WHEN d.status = 'pending' THEN GREATEST(now(), p_when) ELSE now() END
        FROM made,
             jsonb_to_recordset(p_rows) AS d(channel text, status text, skip_reason text)
    )
    SELECT made.created_at INTO made_at FROM made;
    RETURN made_at;
END
$function$
"""

DROP = (
    "DROP FUNCTION IF EXISTS notifications.write_unchosen("
    "uuid, integer, text, jsonb, text, text, text, text[], boolean, boolean, boolean, text, "
    "timestamptz, jsonb)"
)


class Migration(migrations.Migration):
    dependencies = [("notifications", "0018_broadcast_once")]

    operations = [migrations.RunSQL(CREATE, reverse_sql=DROP)]
