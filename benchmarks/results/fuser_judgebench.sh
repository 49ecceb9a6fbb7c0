#!/bin/sh
# The live LLM-as-a-Fuser row on docs/results.md: the fuser (panel_fuser_local.yaml) reads the
# recorded critiques of three JudgeBench judges on the first 50 pairs of the shared split; its
# answers are recorded in fuser_smollm2_judgebench50.jsonl (a rerun reads them and calls nothing).
# Run from the repository root with the shared data at $DATA (default /work/shared/data).
# PANEL, VOTES and JSON choose another fuser (fuser_qwen_judgebench.sh sets them for Qwen).
DATA=${DATA:-/work/shared/data}
J="$DATA/judgebench"
O="$J/outputs/dataset=judgebench,response_model=gpt-4o-2024-05-13"
exec .venv/bin/python -m judgefuse.cli eval \
  "$J/dataset=judgebench,response_model=gpt-4o-2024-05-13.jsonl" \
  "$O,judge_name=arena_hard,judge_model=o1-mini-2024-09-12.jsonl" \
  "$O,judge_name=reward_model,judge_model=Skywork_Skywork-Reward-Gemma-2-27B.jsonl" \
  "$O,judge_name=reward_model,judge_model=internlm_internlm2-20b-reward.jsonl" \
  --fuser "${PANEL:-benchmarks/results/panel_fuser_local.yaml}" \
  --fuser-votes "${VOTES:-benchmarks/results/fuser_smollm2_judgebench50.jsonl}" \
  --fuser-concurrency 1 --limit "${LIMIT:-50}" --bootstrap 1000 \
  --methods majority mean_probability stacked fuser \
  --json "${JSON:-benchmarks/results/fuser_judgebench.json}" "$@"
