"""Learning from labels: threshold tuning data, refits and promotion, the cold start."""
