"""The report: Markdown, HTML and JSON with plots and timelines, and docs/results generated from records."""
