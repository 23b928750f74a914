"""The `sparkmirror` command: one small module per sub-command."""
