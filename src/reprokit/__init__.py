"""Reproduce distributed-training papers with Collective Knowledge: role plans,
supervised launchers, log parsing and unified results.

CK entries (program/, package/, soft/) stay thin and call into this package;
CK's dict-in/dict-out style is confined to ``reprokit.ck.boundary``.
"""

__version__ = "0.1.0"
