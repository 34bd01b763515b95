from worker.cli.main import main

raise SystemExit(main())
