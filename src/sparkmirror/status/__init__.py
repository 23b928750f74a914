"""A flow's status: what the running process reports about itself (:mod:`.reporter`) and what
``sparkmirror status`` reads back from the clusters (:mod:`.reader`). The record format and the
health rules are pure, in :mod:`sparkmirror.core.status`.
"""
