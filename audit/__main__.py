"""python -m audit → the costaudit CLI."""
from audit.cli import main

main()
