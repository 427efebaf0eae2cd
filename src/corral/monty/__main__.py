"""`python -m corral.monty subprocess`: serve Monty's wire protocol on stdin and stdout."""

from .cli import main

main()
