"""Ships the iteration model's predictions that every report asks for (whatif/shipped_predictions.json), once per
release:

    python -m reprokit.study.report.ship_predictions

It asks what a report of the P3 study predicts (the predicted verdicts, the sensitivity figure, the map of today's
hardware) and writes every prediction that gave. It sits with the report, above both the analysis (the predicted
verdicts) and the what-if model (the figures), so that neither of them imports the other's side.
"""
from __future__ import annotations

import sys

from reprokit.study.analysis.labelled import predicted_judged
from reprokit.study.paper.claims import repository_study
from reprokit.study.whatif import shipped_predictions
from reprokit.study.whatif.model_check import ModelValidation
from reprokit.study.whatif.sensitivity import hardware_map, sensitivity


def what_reports_ask() -> None:
    """Everything a report of the P3 study predicts with the stored validation record."""
    study = repository_study("sysml19-p3")
    validation = ModelValidation.stored()
    for claim in study.claims:
        if claim.bandwidth:
            predicted_judged(claim, study.tolerance, validation)
    sensitivity(study)
    hardware_map(study)


def main() -> int:
    what_reports_ask()
    written = shipped_predictions.write_asked()
    print(f"wrote {shipped_predictions.SHIPPED}: {written} predictions of model {shipped_predictions.model_version()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
