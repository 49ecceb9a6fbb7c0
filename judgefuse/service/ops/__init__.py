"""Operating the service: serve and export commands, retention, health."""
