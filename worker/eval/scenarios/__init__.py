"""memfleet eval's scenario suite: one JSON file per kind (worker.eval.suite reads them)."""
