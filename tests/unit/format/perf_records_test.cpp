// perf record tests: see below
