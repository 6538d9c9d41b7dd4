from groupcoord.cli import main

raise SystemExit(main())
