"""`python -m bench [--quick] [--only NAME[,NAME]] [--backend B] [--mode forward|grad|both]
[--threads N] [--out DIR]` — see bench/README.md."""

import sys

from bench import set_threads, threads_from_argv

set_threads(threads_from_argv(sys.argv[1:]))  # before anything imports numpy

from bench.harness import main  # noqa: E402  (imports numpy)

sys.exit(main())
