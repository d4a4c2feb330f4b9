from acp_server.cli import main

raise SystemExit(main())
