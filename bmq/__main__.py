"""`python -m bmq` is the `bmq` command."""

from bmq.cli import main

main()
