"""Scorers and graders that bring judgefuse verdicts into the evaluation frameworks people
already run (Inspect AI, DeepEval, promptfoo). Each module imports its framework, so nothing
here is imported unless used; all of them talk to a gateway through :mod:`judgefuse.client`."""
