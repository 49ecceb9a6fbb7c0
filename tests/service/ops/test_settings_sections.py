"""Settings nested by slice: nested environment variables, old flat names, flat and nested kwargs."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from judgefuse.service.settings import Settings, SettingsError, env_name, env_names, load_settings


def test_a_nested_environment_variable_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    digest = hashlib.sha256(b"k").hexdigest()
    monkeypatch.setenv("JUDGEFUSE_REVIEW__AUDIT_PLAN_TTL_S", "42")
    monkeypatch.setenv("JUDGEFUSE_WEB__API_KEYS", f'{{"acme": "{digest}"}}')
    monkeypatch.setenv("JUDGEFUSE_SERVER__PORT", "9001")
    settings = load_settings()
    assert settings.review.audit_plan_ttl_s == 42.0
    assert settings.web.api_keys == {"acme": digest}
    assert settings.server.port == 9001
    assert settings.open_mode is False


def test_keyword_arguments_beat_nested_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGEFUSE_LEARNING__MIN_LABELS_FOR_REFIT", "70")
    assert load_settings().learning.min_labels_for_refit == 70
    assert load_settings(min_labels_for_refit=80).learning.min_labels_for_refit == 80
    assert load_settings(learning={"min_labels_for_refit": 90}).learning.min_labels_for_refit == 90


def test_an_old_flat_environment_variable_names_the_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGEFUSE_AUDIT_PLAN_TTL_S", "42")
    with pytest.raises(SettingsError, match="JUDGEFUSE_AUDIT_PLAN_TTL_S -> JUDGEFUSE_REVIEW__AUDIT_PLAN_TTL_S"):
        load_settings()
    monkeypatch.delenv("JUDGEFUSE_AUDIT_PLAN_TTL_S")
    monkeypatch.setenv("JUDGEFUSE_STORAGE_URL", "sqlite:///x.db")
    with pytest.raises(SettingsError, match="JUDGEFUSE_STORAGE__STORAGE_URL"):
        Settings()


def test_flat_and_nested_keyword_arguments_both_work() -> None:
    flat = load_settings(min_labels_for_refit=50, review_lease_s=60.0, th_eps=0.05)
    nested = load_settings(learning={"min_labels_for_refit": 50}, review={"review_lease_s": 60.0},
                           estimates={"th_eps": 0.05})
    assert flat == nested
    assert flat.learning.min_labels_for_refit == 50 and flat.review.review_lease_s == 60.0
    mixed = load_settings(review_lease_s=60.0, review={"review_max_lease": 5})
    assert mixed.review.review_lease_s == 60.0 and mixed.review.review_max_lease == 5


def test_a_field_given_flat_and_nested_is_refused() -> None:
    with pytest.raises(SettingsError, match=r"review_lease_s is given both flat .* and nested"):
        load_settings(review_lease_s=60.0, review={"review_lease_s": 70.0})


def test_yaml_takes_flat_and_nested_keys(tmp_path: Path) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text("refit_folds: 3\nestimates:\n  calibration_bins: 20\n")
    settings = load_settings(config)
    assert settings.learning.refit_folds == 3 and settings.estimates.calibration_bins == 20
    config.write_text("refit_folds: 3\nlearning:\n  refit_folds: 4\n")
    with pytest.raises(SettingsError, match="refit_folds is given both"):
        load_settings(config)


def test_errors_name_the_section_and_the_field() -> None:
    with pytest.raises(SettingsError, match=r"review\.review_max_lease"):
        load_settings(review_max_lease=0)
    with pytest.raises(SettingsError, match=r"learning\.refit_folds"):
        load_settings(learning={"refit_folds": 1})
    with pytest.raises(SettingsError, match="unknown_field"):
        load_settings(unknown_field=1)


def test_env_names() -> None:
    assert env_name("audit_plan_ttl_s") == "JUDGEFUSE_REVIEW__AUDIT_PLAN_TTL_S"
    assert "JUDGEFUSE_JUDGING__MAX_INFLIGHT_TOTAL" in env_names()
    assert "JUDGEFUSE_SERVER__MAX_INFLIGHT_WORK" in env_names()
    assert "JUDGEFUSE_SERVER__SHED_WAIT_S" in env_names()
    assert "JUDGEFUSE_MONITORING__METRICS_MAX_AGE_S" in env_names()
    assert "JUDGEFUSE_SERVER__WORK_WAIT_S" in env_names()
    assert "JUDGEFUSE_SERVER__WORK_LIFO_AFTER_S" in env_names()
    assert len(env_names()) == 69  # one per field of the eight sections
