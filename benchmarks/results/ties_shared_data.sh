# Tie-aware numbers on the shared data (docs/offline-evaluation.md, 'Ties'); output: ties_shared_data.txt.
# "before" is the tree before tie votes (commit 221a09b^: git archive 221a09b^ judgefuse | tar -x -C /tmp/before).
set -e
.venv/bin/python -m judgefuse.cli eval ../shared/data/judgebench --bootstrap 200 --quiet --json /tmp/jb_after.json
(cd /tmp/before && /work/main/.venv/bin/python -m judgefuse.cli eval /work/shared/data/judgebench --bootstrap 200 --quiet --json /tmp/jb_before.json)
.venv/bin/python -m judgefuse.cli eval ../shared/data/llmbar --methods majority mean_probability confidence_weighted dawid_skene \
  --bootstrap 100 --quiet --json /tmp/llmbar_after.json
{
  echo "## JudgeBench (350 pairs, 10 judges), before -> after tie votes (A=B) count as p_a 0.5"
  .venv/bin/python benchmarks/ties_table.py /tmp/jb_after.json --before /tmp/jb_before.json
  echo
  echo "## LLMBar decisions (1,200 items, 65 judges; no tie labels, no tie votes: the ties are fused exact ties)"
  .venv/bin/python benchmarks/ties_table.py /tmp/llmbar_after.json | grep -v "^| [A-Z][A-Za-z0-9]*-\?[A-Za-z0-9]*/"
} > benchmarks/results/ties_shared_data.txt
