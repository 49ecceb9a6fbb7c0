"""``ServiceMetrics.child``: a label set's child bound once, counting in the same series."""

from __future__ import annotations

from judgefuse.service.kernel.metrics import ServiceMetrics


def test_a_bound_child_is_the_series_labels_returns_and_counts_in_it() -> None:
    metrics = ServiceMetrics()
    child = metrics.child(metrics.verdicts, "acme", "p1", "majority", "auto_accept")
    assert child is metrics.verdicts.labels("acme", "p1", "majority", "auto_accept")
    assert metrics.child(metrics.verdicts, "acme", "p1", "majority", "auto_accept") is child
    child.inc()
    metrics.verdicts.labels("acme", "p1", "majority", "auto_accept").inc()
    metrics.child(metrics.http_latency, "POST", "/v1/judge", "200").observe(0.004)
    text = metrics.render().decode()
    assert ('judgefuse_verdicts_total{method="majority",panel="p1",route="auto_accept",'
            'tenant="acme"} 2.0') in text
    assert 'judgefuse_http_request_duration_seconds_count{method="POST",route="/v1/judge",status="200"} 1.0' in text
    # another metric with the same label values is another child
    other = metrics.child(metrics.refits, "acme", "p1", "majority")
    assert other is not metrics.child(metrics.labels, "acme", "p1", "majority")
