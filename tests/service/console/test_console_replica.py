"""The overview's "this replica" block: the event loop's lag and the 429s of the process that
served the page, equal to what ``/metrics`` exports for the same moment, and a tenant sees only
its own refusals (and the ones refused before authentication)."""

from __future__ import annotations

import html as html_lib
import math
import re

import pytest
from jf_test_support import app_support as S
from jf_test_support import console_support as C
from jf_test_support import panel_support as P
from jf_test_support.waiting import poll_until
from prometheus_client.parser import text_string_to_metric_families

from judgefuse.service.console.replica import bound_text, bucket_quantile


def test_bucket_quantile_is_the_bound_of_the_bucket_holding_it() -> None:
    # 100 observations: 50 in (1, 2] ms, 49 in (2, 5] ms, 1 in (5, 10] ms
    buckets = [(0.001, 0.0), (0.002, 50.0), (0.005, 99.0), (0.01, 100.0), (math.inf, 100.0)]
    assert bucket_quantile(buckets, 0.5) == 0.002
    assert bucket_quantile(buckets, 0.51) == 0.005
    assert bucket_quantile(buckets, 0.99) == 0.005
    assert bucket_quantile(buckets, 0.999) == 0.01
    assert bucket_quantile([(0.001, 0.0), (math.inf, 0.0)], 0.5) is None
    assert bucket_quantile([(0.001, 1.0), (math.inf, 10.0)], 0.5) == math.inf
    assert bound_text(0.002) == "≤ 2 ms" and bound_text(math.inf) == "> 5000 ms"
    assert bound_text(None) == "–"


def _series(text: str) -> tuple[list[tuple[float, float]], float, dict[tuple[str, str], float]]:
    buckets: list[tuple[float, float]] = []
    count = 0.0
    rejected: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "judgefuse_event_loop_lag_seconds_bucket":
                buckets.append((float(sample.labels["le"]), sample.value))
            elif sample.name == "judgefuse_event_loop_lag_seconds_count":
                count = sample.value
            elif sample.name == "judgefuse_admission_rejected_total":
                rejected[(sample.labels["tenant"], sample.labels["limit"])] = sample.value
    return sorted(buckets), count, rejected


def _span(page: str, name: str) -> str:
    found = re.search(rf'<section class="replica".*?class="{re.escape(name)}">([^<]*)<', page, re.S)
    assert found, name
    return html_lib.unescape(found.group(1)).strip()


@pytest.mark.parametrize("backend", ["sqlite"])
async def test_the_replica_block_equals_metrics(tmp_path, backend) -> None:
    settings = S.make_settings(tmp_path, [P.external_panel(tmp_path)])
    async with S.running_app(settings) as (app, client):
        await C.seed(client, app.state.gateway.storage, n=8)
        metrics = app.state.metrics
        # refusals as admission and backpressure count them (the real counters of this app)
        metrics.admission_rejected.labels("tenant-a", "max_inflight_per_tenant").inc(3)
        metrics.admission_rejected.labels("tenant-b", "max_inflight_per_tenant").inc(5)
        metrics.admission_rejected.labels("-", "shed_loop_lag_s").inc(2)
        await poll_until(lambda: metrics.loop_lag.samples >= 20)  # sampled every 5 ms once started
        assert metrics.loop_lag.samples >= 20, metrics.loop_lag.samples
        metrics.loop_lag.stop()  # freeze the histogram: the page and /metrics read the same one
        page = (await client.get("/console", headers=C.H)).text
        operator = (await client.get("/console", headers=S.admin())).text
        exported = (await client.get("/metrics", headers=S.admin())).text
    buckets, count, rejected = _series(exported)
    assert count >= 20 and int(_span(page, "lag-samples")) == int(count)
    for q, name in ((0.5, "lag-p50"), (0.99, "lag-p99"), (0.999, "lag-p999")):
        assert _span(page, name) == bound_text(bucket_quantile(buckets, q)), name
    # the tenant sees its own 429s and the pre-authentication ones, not tenant-b's
    assert rejected[("tenant-b", "max_inflight_per_tenant")] == 5
    assert int(_span(page, "refused-total")) == 3 + 2
    assert int(_span(operator, "refused-total")) == 3 + 5 + 2
    assert 'data-limit="shed_loop_lag_s">shed_loop_lag_s 2<' in page
