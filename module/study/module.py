"""CK module `study`: a paper's claims, the sweep that checks them, the report (code: reprokit.ck.study).

    ck reproduce study:NAME [--target=MACHINE] [--models=a,b] [--bandwidths=1gbit,4gbit] [--variants=baseline,p3]
                            [--repetitions=N] [--quick] [--profile=smoke|paper] [--link_capacity=RATE]
                            [--env.K=V ...] [--resume[=SWEEP]] [--store=DIR]
    ck report study:NAME [--out_dir=DIR] [--store=DIR]
    ck export study:NAME --out=FILE.tar.gz [--store=DIR]
    ck import study:NAME --in=FILE.tar.gz [--store=DIR]
"""
from reprokit.ck.study import export, import_bundle, init, report, reproduce  # noqa: F401

cfg, work, ck = {}, {}, None  # set by CK when it loads a module
