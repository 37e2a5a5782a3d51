"""``python -m cachecraft_lib.cli``."""

from . import main

raise SystemExit(main())
