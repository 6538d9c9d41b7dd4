"""`python -m groupcoord.faults`: the fault suite (same as `groupcoord faults`)."""

import sys

from groupcoord.faults.run import main

sys.exit(main())
