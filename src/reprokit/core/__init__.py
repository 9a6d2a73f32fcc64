"""The core every layer uses: errors, values and their checks, schemas, files written and read safely, paths."""
