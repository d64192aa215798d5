"""``python -m privpub``: the command-line interface."""

from privpub.cli import main

main()
