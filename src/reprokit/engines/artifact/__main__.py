"""python -m reprokit.engines.artifact install: what the artifact packages' install.sh runs."""
import sys

from reprokit.engines.artifact.install import main

sys.exit(main())
