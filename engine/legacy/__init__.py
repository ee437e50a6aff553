"""``omnigraph-v4``: a faithful emulation of the previous release's (format 4) writer.

It exists so that rehearsals and tests have real format-4 graphs to migrate. It is the only
place in the project allowed to Append to, or run an unfiltered merge on, a keyed table.
"""
