"""Judging: one pair or a batch through a panel; the path, step by step, is :mod:`.pipeline`."""
