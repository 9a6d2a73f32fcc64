"""The sweep: the matrix run by `ck reproduce`, one guarded `ck run` per configuration, resumable."""
