"""The what-if model: one iteration simulated, its validation against emulated runs, predictions."""
