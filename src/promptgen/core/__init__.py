"""What every stage shares: errors, the item contract, atomic files and hashes, validation, version.

The bottom of the import graph: it imports nothing else of the project, so the runners, the
analysis and the command line can use it without pulling in any builder.
"""
