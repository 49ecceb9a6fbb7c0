"""``judgefuse winrate`` over a votes file whose items name their two systems."""

from __future__ import annotations

import json
import random

from judgefuse.cli import main


def _write(path, n: int = 300, n_labels: int = 80) -> None:
    rng = random.Random(0)
    labelled = set(rng.sample(range(n), n_labels))
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            x_first = i % 2 == 0
            x_wins = rng.random() < 0.5
            truth = "A" if x_wins == x_first else "B"
            x_letter = "A" if x_first else "B"
            says_x = rng.random() < (0.85 if x_wins else 0.4)  # judges biased toward X
            choice = x_letter if says_x else ("B" if x_letter == "A" else "A")
            item = {"id": f"i{i}", "question": "q", "answer_a": "a", "answer_b": "b",
                    "metadata": {"system_a": "x" if x_first else "y", "system_b": "y" if x_first else "x"}}
            if i in labelled:
                item["label"] = truth
            votes = [{"judge": "j", "mode": "recorded", "choice": choice, "confidence": 0.9,
                      "p_a": 0.9 if choice == "A" else 0.1}]
            out.write(json.dumps({"item": item, "votes": votes}) + "\n")


def test_winrate_prints_the_three_estimates(tmp_path, capsys):
    votes = tmp_path / "votes.jsonl"
    _write(votes)
    assert main(["winrate", str(votes), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["x"], out["y"], out["n_verdicts"], out["n_labels"]) == ("x", "y", 300, 80)
    assert out["judge_only"]["estimate"] > out["labels_only"]["estimate"] + 0.1  # the judges' bias
    corrected = out["corrected"]
    assert corrected["lower"] <= 0.5 + 0.12 and corrected["method"] == "prediction-powered (t quantile, 78 df)"
    assert main(["winrate", str(votes), "--x", "y", "--y", "x"]) == 0
    table = capsys.readouterr().out
    assert "win rate of y over x" in table and "corrected (PPI)" in table


def test_winrate_refuses_a_file_that_names_no_systems(tmp_path, capsys):
    votes = tmp_path / "votes.jsonl"
    _write(votes, n=20, n_labels=5)
    assert main(["winrate", str(votes), "--field-a", "nope"]) == 2
    assert "no item names two systems" in capsys.readouterr().err


def test_tie_labels_count_half_in_the_labelled_slice(tmp_path, capsys):
    """Issue 43: a tie-labelled item was left out of the labelled slice; it is a label worth 1/2."""
    votes = tmp_path / "votes.jsonl"
    lines = []
    for i in range(40):
        x_first = i % 2 == 0
        item = {"id": f"i{i}", "question": "q", "answer_a": "a", "answer_b": "b",
                "metadata": {"system_a": "x" if x_first else "y", "system_b": "y" if x_first else "x"}}
        if i < 10:
            item["label"] = "A" if x_first else "B"  # x wins
        elif i < 20:
            item["label"] = "tie"
        elif i < 22:
            item["label"] = "both_bad"
        vote = {"judge": "j", "mode": "recorded", "choice": "A", "confidence": 0.9, "p_a": 0.9}
        lines.append(json.dumps({"item": item, "votes": [vote]}) + "\n")
    votes.write_text("".join(lines), encoding="utf-8")
    assert main(["winrate", str(votes), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_labels"] == 22
    assert out["labels_only"]["estimate"] == (10 * 1.0 + 12 * 0.5) / 22
