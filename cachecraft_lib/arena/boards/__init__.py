"""Arena boards: boards as data (``*.yaml`` here), their items, splits and secret, calibration, MATH-500, board C."""
