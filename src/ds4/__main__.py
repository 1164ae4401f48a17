from ds4.apps.cli import main

raise SystemExit(main())
