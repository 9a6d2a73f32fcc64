"""CK hooks of program:p3 (reprokit is installed in ck's own environment by `make setup`)."""
from reprokit.ck.program import postprocess as ck_postprocess, preprocess as ck_preprocess  # noqa: F401
