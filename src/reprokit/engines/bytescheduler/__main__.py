"""python -m reprokit.engines.bytescheduler install: what package:bytescheduler-github's install.sh runs."""
import sys

from reprokit.engines.bytescheduler.install import main

sys.exit(main())
