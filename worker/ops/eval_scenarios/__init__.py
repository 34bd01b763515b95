"""memfleet eval's scenario suite: one JSON file per kind (worker.ops.eval_suite reads them)."""
