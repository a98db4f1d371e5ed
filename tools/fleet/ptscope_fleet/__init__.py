"""ptscope-fleet: pt-decode over many archives as Dask tasks, and one summary over all of them."""
