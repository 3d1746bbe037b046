"""Profiler traces after the run: offline analysis with xprof, attaching it to records, serving them."""
