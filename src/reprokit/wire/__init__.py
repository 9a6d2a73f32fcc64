"""What the engine's interpreter and the framework both read: the lines and files a role writes and the framework
parses, the names both sides use, and the synthetic corpus both generate.

Standard library only (tests/unit/test_import_direction.py checks it), and nothing else of reprokit: the run ships
this package, with ``reprokit/__init__.py`` (which imports nothing), beside program/p3's scripts into every role's
working folder (``core.paths.shipped_name``), so the engine's interpreter, which has MXNet but not reprokit, imports
``reprokit.wire.p3_timeline`` under the same name as the framework does. One implementation of each format serves
its writer (a worker) and its readers (the run's result, the study's report).
"""
