"""The monitor's stored state, typed (judgefuse.service.monitoring.monitor_state): a blob in the
format the service has stored (written by the dict-based monitor before the state was typed)
loads, writes back byte for byte, folds a label into the same JSON, and is read by the
monitors as the alarm it holds."""

from __future__ import annotations

import hashlib
import json

from judgefuse.service.monitoring.monitor import Alarm, Monitors, monitor_key
from judgefuse.service.monitoring.monitor_state import (
    FoldedLabel,
    MonitorState,
    StoredAlarm,
    counted_labels,
    feed_label,
    in_fold_order,
    refold,
    since_clear,
)
from judgefuse.service.settings import Settings
from judgefuse.service.storage import SQLiteStorage

STORED = '{"target": 0.9, "alpha": 0.05, "threshold_version": 3, "precision": {"kind": "precision_monitor", "version": 1, "target": 0.9, "alpha": 0.05, "prior": [8.0, 1.9999999999999996], "alarmed_at": 7, "min_level": 6, "t": 14, "total": 4.0, "sums": [[4.0, 0.0, 0.0, 0.0]]}, "judges": {"e1": {"kind": "brier_drift", "detector": {"kind": "mean_shift", "version": 1, "reference_size": 200, "alpha": 0.05, "reference_sum": 4.760000000000002, "reference_squares": 2.878400000000001, "reference_count": 14, "alarmed_at": null, "direction": null, "monitor": {"min_level": 6, "t": 0, "total": 0.0, "sums": [[0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]], "total_sq": 0.0}}}}, "series": [[1012.0, 13, 0.3076923076923077, 0.019280711386116124, 0.814216146209774], [1013.0, 14, 0.2857142857142857, 0.015977250022371284, 0.793695066934489]], "alarm": {"at": 1006.0, "labels": 7, "upper": 0.892908696089557}, "restarts": 1, "seen": ["3a6a13987214", "658321d8edc9", "83394cef7b8d", "a99245cf0542", "3697d8ccd721", "f59e58d5a662", "954b17889436", "756d3ce39ca5", "c0f3cceb1059", "33025feb5100", "cd94bf2e2a66", "16aa11b2d451", "a0668d0b447c", "9cbc38fc6a78"], "cleared_at": 990.5}'
"""Threshold version 3's blob after 14 audit labels (4 right; alarmed at the 7th), one
operator clear before them: the dict-based monitor's new_blob + fold_labels, as JSON."""


def sha256(body: dict) -> str:
    return hashlib.sha256(json.dumps(body).encode()).hexdigest()


def test_a_stored_blob_loads_and_writes_back_unchanged():
    state = MonitorState.from_json(json.loads(STORED))
    assert json.dumps(state.to_json()) == STORED
    assert (state.target, state.alpha, state.threshold_version) == (0.9, 0.05, 3)
    assert state.alarm == StoredAlarm(1006.0, 7, 0.892908696089557)
    assert (state.restarts, state.cleared_at, counted_labels(state)) == (1, 990.5, 14)
    assert len(state.seen) == 14 and len(state.series) == 2 and set(state.judges) == {"e1"}


def test_folding_into_a_stored_blob_writes_what_the_dict_monitor_wrote():
    state = MonitorState.from_json(json.loads(STORED))
    label = FoldedLabel("v14", True, 1014.0, (("e1", 0.7, True), ("e2", 0.6, False)))
    assert feed_label(state, label, series_points=2) is False  # alarmed already: not raised again
    body = state.to_json()
    assert counted_labels(state) == 15 and body["series"][-1][:2] == [1014.0, 15]
    assert sha256(body) == "a4145bad38d51b1232130f57e978898f1eb44c817ed788ed7d2eee3439f36805"
    assert feed_label(state, label, series_points=2) is None  # counted: its verdict is seen

    old = MonitorState.from_json(json.loads(STORED))
    labels = [FoldedLabel(f"v{i}", i % 4 == 0, 1000.0 + i, (("e1", 0.8, i % 2 == 0),)) for i in range(14)]
    assert since_clear(old, labels) == labels  # all decided after the clear at 990.5
    rebuilt, raised = refold(old, in_fold_order(labels[3:]), target=0.9, version=3, alpha=0.05)
    assert not raised and rebuilt.alarm == old.alarm and rebuilt.restarts == 1
    assert sha256(rebuilt.to_json()) == "e086b223e075ab3dc8aef08b65072d24cff6541ddf3773f1c35308ba24da2b72"


def test_a_blob_without_the_later_fields_loads_with_their_defaults():
    body = {k: v for k, v in json.loads(STORED).items() if k in ("target", "alpha", "threshold_version", "precision")}
    state = MonitorState.from_json(body)
    assert (state.judges, state.series, state.alarm, state.restarts, state.seen, state.cleared_at) == (
        {},
        [],
        None,
        0,
        [],
        None,
    )
    assert counted_labels(state) == 14


async def test_the_monitors_read_a_stored_blob(tmp_path):
    storage = SQLiteStorage(tmp_path / "state.db")
    await storage.open()
    try:
        assert await storage.put_state("t", monitor_key("ext", 3), json.loads(STORED), expected_version=0) == 1
        monitors = Monitors(Settings(), storage, storage, storage)
        assert await monitors.alarm("t", "ext", 3) == Alarm(3, 1006.0, 7, 0.892908696089557, 0.9)
        assert await monitors.alarm("t", "ext", 4) is None
    finally:
        await storage.close()
