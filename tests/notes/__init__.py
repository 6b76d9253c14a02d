"""The tests' own app: a message and a category of their own, registered in its
notifications.py through the catalogue's public API (docs/messages.md), as any app outside the
project's packages would. tests/settings.py installs it for the suite and every process the
suite starts, so the engine's and the accounts' tests queue and drain the same rows with the
showcase installed or not (V10R_SHOWCASES=0, .ci/run)."""
