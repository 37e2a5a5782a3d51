"""The eviction-policy side: the policy interface, features, FRC, the scorer presses, the method registry."""
