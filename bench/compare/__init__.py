"""Regression detection between runs.

The detector (pure functions), run-directory stores, and the simulation of its rates.
"""
