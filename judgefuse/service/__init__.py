"""The service room: FastAPI app, settings, storage, auth, routes (docs/design.md, 'Serving').

Nothing else in ``judgefuse`` imports this package; it imports the rooms below it.
"""
