"""Judging: one pair or a batch through a panel (admission, checks, single flight, votes, routing)."""
