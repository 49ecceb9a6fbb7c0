"""The service's command-line commands (``judgefuse serve``, ``export``, ``annotators``): above
the app they start, below ``judgefuse/cli.py`` that adds them (docs/design.md, 'Architecture')."""
