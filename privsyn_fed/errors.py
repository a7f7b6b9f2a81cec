"""Error types. The command line maps ``InputError`` to exit status 2 and prints only its message."""


class InputError(ValueError):
    """Bad input or bad usage: a file, column, row or value the user must fix.

    The message is one line that names what is at fault.
    """


class BudgetExceeded(RuntimeError):
    """A charge would take the privacy ledger past its budget; nothing was released."""


class MPCError(RuntimeError):
    """A secure computation cannot go on (a party stopped, the rendezvous failed); one-line message."""
