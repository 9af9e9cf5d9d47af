"""sift_bench: a benchmark harness for online loss-based data selection (smart sifting)."""
