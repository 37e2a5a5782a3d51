"""What runs inside the sandbox (on its own sys.path there; importable here as a package for the parent)."""
