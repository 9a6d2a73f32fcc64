"""The authors' 2018 artifact (their MXNet fork with P3, and its baseline build) as two engines.

- ``config``: the build configuration (sources, CUDA, the make line) from the CK package's settings;
- ``install``: the install pipeline (``python -m reprokit.engines.artifact install``, run by the packages' install.sh);
- ``installed``: a registered install (its manifest, and the CK env keys soft:tool.p3 writes and a run reads);
- ``command``: the artifact's own training commands (train_imagenet.py, the bundled Sockeye);
- ``engine``: the two registered engines, the P3 fork and the baseline build.
"""
