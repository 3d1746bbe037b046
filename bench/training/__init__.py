"""Worker side: devices, strategies, precision, models, the training loops and trace capture."""
