"""`python -m deskbench.cli`."""

from deskbench.cli.app import main

main()
