"""Arena submissions: folder checks, the method API, the sandboxed press, conversion from a search program."""
