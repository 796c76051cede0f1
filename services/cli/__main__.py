"""``python -m services.cli``: the ``quire`` command."""

from services.cli.app import main

main()
