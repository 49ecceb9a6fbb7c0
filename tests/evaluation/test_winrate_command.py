"""``judgefuse winrate`` over a votes file whose items name their two systems."""

from __future__ import annotations

import functools
import json
import random

import pytest

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


def _awkward_file(path, n: int = 600, coerced: bool = False) -> None:
    """Items of four systems (named by strings, by the number 1 and by True, which equal 1 as a
    key but not as a name), some naming one system only, several judges with invalid and tie
    votes, labels A, B, tie and both_bad. With ``coerced`` every other line has a confidence as
    text (which the models coerce), so the reader takes each line on its own, half of them
    through the models; without, it takes whole blocks at once."""
    rng = random.Random(3)
    systems = ["x", "y", 1, True]
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            a, b = rng.sample(systems, 2)
            metadata = {"system_a": a, "system_b": b, "note": {"i": i}}
            if i % 17 == 0:
                del metadata["system_b"]
            item = {"id": f"i{i}", "question": "q", "answer_a": "a", "answer_b": "b", "metadata": metadata}
            label = rng.choice(["A", "B", "tie", "both_bad", None, None, None])
            if label is not None:
                item["label"] = label
            votes = []
            for j in range(3):
                roll = rng.random()
                if roll < 0.1:
                    votes.append({"judge": f"j{j}", "mode": "sc", "error": "unparseable"})
                elif roll < 0.2:
                    votes.append({"judge": f"j{j}", "mode": "recorded", "tie": True})
                else:
                    confidence = round(rng.uniform(0.5, 1.0), 3)
                    votes.append({"judge": f"j{j}", "mode": "recorded", "choice": rng.choice("AB"),
                                  "confidence": str(confidence) if coerced and i % 2 else confidence})
            out.write(json.dumps({"item": item, "votes": votes}) + "\n")


@pytest.mark.parametrize("coerced", [False, True])
def test_the_columnar_path_gives_the_per_item_answer(tmp_path, coerced: bool) -> None:
    """Issue 46: the voting methods read the file into arrays and fuse it at once; the answer is
    the per-item path's (the reference: every item validated into models and fused one by one) for
    every columnar method and every pair of systems, the numbers equal to the last bit."""
    import argparse

    from judgefuse.evaluation import winrate_command as wr
    from judgefuse.fusion import get_method
    from judgefuse.fusion.columnar import COLUMNAR_METHODS

    votes = tmp_path / "votes.jsonl"
    _awkward_file(votes, coerced=coerced)
    seen = set()
    for method in COLUMNAR_METHODS:
        for x, y in ((None, None), ("y", "x"), ("True", "y"), ("x", "1")):
            args = argparse.Namespace(votes=[str(votes)], field_a="system_a", field_b="system_b", x=x, y=y,
                                      method=method, alpha=0.1, json=True)
            columnar = _answer(wr._columnar_comparisons, args)
            reference = _answer(functools.partial(wr._item_comparisons, method=get_method(method)), args)
            assert columnar == reference
            seen.add(columnar[:2] if isinstance(columnar, tuple) else columnar)
    # the pairs select different items; by default X and Y are 1 and True, which no item compares
    assert len(seen) == 4 and "no item compares '1' with 'True' (systems: 1, True, x, y)" in seen


def _answer(comparisons, args):
    """(X, Y, the estimates as JSON) from ``comparisons(args)``, or the error's message."""
    from judgefuse.evaluation import winrate_command as wr

    try:
        x, y, rates = wr._win_rates(comparisons(args), args)
    except wr.WinRateInputError as exc:
        return str(exc)
    return x, y, json.dumps(rates.as_dict(), sort_keys=True)
