"""The recipients' models move to the recipients app (recipients/migrations/0001_initial.py):
Django forgets them here, and their tables stay as they are."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0014_choices_versions"),
        ("recipients", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveConstraint(
                    model_name="channeladdress",
                    name="channel_addresses_one_active",
                ),
                migrations.RemoveConstraint(
                    model_name="channeladdress",
                    name="channel_addresses_one_push_owner",
                ),
                migrations.RemoveField(
                    model_name="pushsubscription",
                    name="address",
                ),
                migrations.RemoveField(
                    model_name="webhooksecret",
                    name="address",
                ),
                migrations.RemoveConstraint(
                    model_name="channelpreference",
                    name="channel_preferences_one_each",
                ),
                migrations.RemoveField(
                    model_name="choicesversion",
                    name="user",
                ),
                migrations.RemoveConstraint(
                    model_name="digestchoice",
                    name="digest_choices_one_each",
                ),
                migrations.RemoveConstraint(
                    model_name="digestchoice",
                    name="digest_choices_cadence_fields",
                ),
                migrations.RemoveConstraint(
                    model_name="recipient",
                    name="recipients_quiet_window_whole",
                ),
                migrations.RemoveField(
                    model_name="channeladdress",
                    name="user",
                ),
                migrations.DeleteModel(
                    name="PushSubscription",
                ),
                migrations.DeleteModel(
                    name="WebhookSecret",
                ),
                migrations.RemoveField(
                    model_name="channelpreference",
                    name="user",
                ),
                migrations.DeleteModel(
                    name="ChoicesVersion",
                ),
                migrations.RemoveField(
                    model_name="digestchoice",
                    name="user",
                ),
                migrations.RemoveField(
                    model_name="recipient",
                    name="user",
                ),
                migrations.DeleteModel(
                    name="ChannelAddress",
                ),
                migrations.DeleteModel(
                    name="ChannelPreference",
                ),
                migrations.DeleteModel(
                    name="DigestChoice",
                ),
                migrations.DeleteModel(
                    name="Recipient",
                ),
            ]
        ),
    ]
