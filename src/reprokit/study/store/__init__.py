"""The results store: write-once run records, signed bundles between evaluators, the store's identity."""
