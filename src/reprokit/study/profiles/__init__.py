"""Emulation profiles: each model's layers and arrays, and the GPUs' per-layer compute made from them."""
