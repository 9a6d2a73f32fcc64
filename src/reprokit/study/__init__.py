"""The study: a paper's claims as data, sweeps of runs, their store, and the analysis and report that judge the claims.

Importing it registers every kind of claim (analysis/kinds.py), so a study entry's claims can be read."""
from reprokit.study.analysis import kinds as _kinds  # noqa: F401  (registers the claim kinds)
