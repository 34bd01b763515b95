"""What the benchmarks share: throwaway servers, the synthetic workload, the worker driven
through its public functions, span timing, /proc readings, stubs, statistics, reports
and plots. Nothing here is a benchmark of its own (a few re-plot a saved file)."""
