"""Guarantees over time (the precision monitor, judge drift) and the Prometheus metrics."""
