"""``judgefuse model``: the local-model commands as a user runs them."""

from __future__ import annotations

from pathlib import Path

from judgefuse.cli import main


def test_model_path_prints_the_shipped_smollm2_gguf(capsys) -> None:
    assert main(["model", "path", "smollm2"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path.name.endswith(".gguf") and path.is_file()
    assert path.read_bytes()[:4] == b"GGUF"


def test_model_path_of_an_opt_in_model_not_installed_says_how_to_install(tmp_path, capsys) -> None:
    assert main(["model", "path", "qwen2.5-coder-1.5b", "--models-dir", str(tmp_path)]) == 2  # an input error
    err = capsys.readouterr().err
    assert err.startswith("judgefuse model: error: ")
    assert "not installed" in err and "judgefuse model install qwen2.5-coder-1.5b" in err


def test_install_without_the_parts_refuses_and_writes_nothing(tmp_path, capsys) -> None:
    assert main(["model", "install", "qwen2.5-coder-1.5b", "--no-install", "--dest", str(tmp_path)]) == 2
    assert "judgefuse model: error:" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_model_path_of_no_such_file_is_an_input_error_in_the_common_style(capsys) -> None:
    assert main(["model", "path", "nosuch"]) == 2
    assert capsys.readouterr().err.startswith("judgefuse model: error: ")
