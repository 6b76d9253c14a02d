# The claim's two lanes, real and demo, each with its own partial index, and an index for the
# demo rows' cap and pruning (and attempt_base's label, now that unsent claims move it too). Built CONCURRENTLY (so outside a transaction): a plain CREATE
# INDEX blocks every write to the queue while it reads the whole table, and DROP INDEX in a
# transaction would hold the table's strongest lock until that transaction ends. The new
# indexes exist before the old claim index goes, so the claim always has one to read.

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):

    atomic = False

    dependencies = [
        ('notifications', '0007_verbose_names'),
    ]

    operations = [
        AddIndexConcurrently(
            model_name='notificationdelivery',
            index=models.Index(condition=models.Q(('status', 'pending'), models.Q(('channel', 'demo'), _negated=True)), fields=['next_attempt_at', 'created_at', 'id'], name='deliveries_claim_real'),
        ),
        AddIndexConcurrently(
            model_name='notificationdelivery',
            index=models.Index(condition=models.Q(('channel', 'demo'), ('status', 'pending')), fields=['next_attempt_at', 'created_at', 'id'], name='deliveries_claim_demo'),
        ),
        AddIndexConcurrently(
            model_name='notificationdelivery',
            index=models.Index(condition=models.Q(('channel', 'demo')), fields=['created_at'], name='deliveries_demo'),
        ),
        RemoveIndexConcurrently(
            model_name='notificationdelivery',
            name='deliveries_claim',
        ),
        migrations.AlterField(
            model_name='notificationdelivery',
            name='attempt_base',
            field=models.PositiveIntegerField(db_default=0, default=0, verbose_name='attempts not counted against the budget'),
        ),
    ]
