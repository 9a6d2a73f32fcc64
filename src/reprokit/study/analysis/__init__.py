"""Analysis of stored runs: speedups with intervals, verdicts per claim, badges, the report's answer."""
