"""The one exception family the apps turn into a one-line message and exit code."""


class Ds4Error(Exception):
    """A problem the user can act on (bad file, bad flag, bad request).

    The message names the problem; the CLI prints it on one line and exits with
    `exit_code`, never with a traceback.
    """

    exit_code = 2


class ComputeUnavailableError(Ds4Error):
    """Part of the compute backend went away mid-request (a distributed worker died).

    The request fails; the backend recovers on its own before the next one, so the
    server answers 503 (retry) in the endpoint's own error shape rather than 500.
    """

    exit_code = 1
