"""A site's own app, outside the project's packages: the worked example of docs/messages.md,
installed by tests/recipients/test_messages_doc.py."""
