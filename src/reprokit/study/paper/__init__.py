"""The paper as data: its claims, the targets they run on, the plan of a sweep, bandwidths as rates."""
