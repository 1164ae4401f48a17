"""The one exception family the apps turn into a one-line message and exit code."""


class Ds4Error(Exception):
    """A problem the user can act on (bad file, bad flag, bad request).

    The message names the problem; the CLI prints it on one line and exits with
    `exit_code`, never with a traceback.
    """

    exit_code = 2
