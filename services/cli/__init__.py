"""The ``quire`` command line: ``app`` (the root command and its global options) and one
module per command group."""


def main() -> None:
    """The ``quire`` entry point (imports the command modules only when run)."""
    from services.cli.app import main as run

    run()
