"""Reproduce distributed-training papers with Collective Knowledge: role plans,
supervised launchers, log parsing and unified results.

CK entries (program/, package/, soft/) stay thin and call into this package;
CK's dicts are seen only by ``reprokit.ck`` (registry look-ups, the entries' hooks, our modules' actions).
"""

__version__ = "0.1.0"
