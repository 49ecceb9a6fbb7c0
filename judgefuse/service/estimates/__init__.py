"""What the labels say: the calibration report, population estimates, the panel's structure."""
