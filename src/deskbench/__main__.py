"""`python -m deskbench`: the same command as the `deskbench` script (e.g. for
`python -X importtime -m deskbench --help`)."""

from deskbench.cli.app import main

main()
