"""social-bias-probes: the `probes` command line and the package version."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("social-bias-probes")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"
