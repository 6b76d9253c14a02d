"""A site's own package: the worked example of docs/channels.md."""
