"""CK module `study`: a paper's claims, the sweep that checks them, the report (code: reprokit.ck.study).

Each action is one call into reprokit.ck.study; its docstring is what `ck ACTION study --help` prints.
"""
from reprokit.ck import study

cfg, work, ck = {}, {}, None  # set by CK when it loads a module


##############################################################################
# Called by CK when it loads the module.

def init(i):
    return {"return": 0}


##############################################################################
# Run the study's matrix through ck run, one stored record per run; then write the report.

def reproduce(i):
    """
    ck reproduce study:NAME [--target=MACHINE] [--models=a,b] [--bandwidths=1gbit,4gbit] [--variants=baseline,p3]
                            [--engines=embedded,artifact]
                            [--repetitions=N] [--quick] [--profile=smoke|paper] [--link_capacity=RATE]
                            [--env.K=V ...] [--resume[=SWEEP]] [--store=DIR]
    """
    return study.reproduce(i)


##############################################################################
# Write the Markdown, HTML and JSON reports: results, plots, timelines, verdicts per claim, badge recommendation.

def report(i):
    """
    ck report study:NAME [--out_dir=DIR] [--store=DIR] [--timeline_config=MODEL,BANDWIDTH]
    """
    return study.report(i)


##############################################################################
# Write every local run of the study (records and run folders) into a bundle.

def export(i):
    """
    ck export study:NAME --out=FILE.tar.gz [--store=DIR]
    """
    return study.export(i)


##############################################################################
# Add another evaluator's runs from a bundle (checked before anything is stored); `ck import study`.

def import_bundle(i):
    """
    ck import study:NAME --in=FILE.tar.gz [--store=DIR]
    """
    return study.import_bundle(i)


##############################################################################
# Predict baseline and p3 iteration times from the discrete-event iteration model (predicted, not measured).

def predict(i):
    """
    ck predict study:NAME --model=vgg --bandwidths=1gbit,10gbit --workers=4,16,64 [--servers=N]
                          [--layout=colocated|dedicated] [--compute_scale=X | --images_per_sec=N [--batch=B]]
                          [--slice=50000] [--latency=SECONDS] [--image_shape=3,224,224] [--out_dir=DIR] [--store=DIR]
    """
    return study.predict(i)
