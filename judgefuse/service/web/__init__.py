"""The HTTP edge: authentication, middleware, deadlines, dependencies, the API reference."""
