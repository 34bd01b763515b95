"""`memfleet eval` (docs/eval.md): the scenario suite and its files (suite, scenarios/),
the run through the real pipeline (run), pure scoring (score, form, bootstrap), the
baselines and the comparison beside other systems (baselines, compare), the reports
(report, qa_report), LongMemEval's items (longmemeval) and the question-answering
part (qa, qa_score, haystack, and the models that answer and judge: qa_wire, qa_rules,
qa_openai). Measurement, not the product: nothing of worker imports it but the CLI's
`memfleet eval` (tests/unit/repo/test_import_boundaries.py)."""
