"""The installed package's version, recorded in every manifest (datasets, results, reports).

It lives at the bottom of the import graph so that every layer can stamp what made a file
without importing the command line (`probes`), which sits at the top.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("social-bias-probes")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"
