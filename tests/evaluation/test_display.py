"""Short display names: within the limit, all different, and every shortened one in the legend."""

from __future__ import annotations

import pytest

from judgefuse.evaluation.display import legend, short_names

JUDGEBENCH = [
    "arena_hard:o1-mini",
    "no_rubric:Qwen3-1.7B",
    "reward_model:GRM-Gemma-2B-rewardmodel-ft",
    "reward_model:Skywork-Reward-Gemma-2-27B",
    "reward_model:Skywork-Reward-Llama-3.1-8B",
    "reward_model:internlm2-20b-reward",
    "reward_model:internlm2-7b-reward",
    "rubric(Qwen3-8B):Qwen3-8B",
    "rubric(Qwen3-8B):Llama-3.1-8B-Instruct",
    "rubric(gpt-4.1):Qwen3-1.7B",
]
# names built to collide: one shared long prefix and suffix, differing only in the middle
CLASHING = [f"reward_model:Skywork-Reward-{middle}-Gemma-2-27B-final" for middle in ("a", "b", "c", "aa", "ab")]


@pytest.mark.parametrize("names", [JUDGEBENCH, CLASHING, JUDGEBENCH + CLASHING])
@pytest.mark.parametrize("limit", [10, 12, 15, 18, 26, 40])
def test_short_names_fit_and_differ(names: list[str], limit: int) -> None:
    short = short_names(names, limit)
    assert list(short) == names
    assert all(len(value) <= limit for value in short.values())
    assert len(set(short.values())) == len(names)
    entries = legend(short)
    assert len(entries) == sum(value != name for name, value in short.items())
    for name, value in short.items():
        if value != name:
            assert f"{value} = {name}" in entries


def test_names_that_fit_are_kept_and_a_model_is_kept_whole_when_it_can_be() -> None:
    short = short_names(JUDGEBENCH, 26)
    assert short["arena_hard:o1-mini"] == "arena_hard:o1-mini"
    assert short["reward_model:internlm2-20b-reward"] == "internlm2-20b-reward"
    assert short["no_rubric:Qwen3-1.7B"] == "no_rubric:Qwen3-1.7B"
    assert short_names(JUDGEBENCH, 18)["no_rubric:Qwen3-1.7B"] == "no_rub…:Qwen3-1.7B"  # Qwen3-1.7B is not unique
