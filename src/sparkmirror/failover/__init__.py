"""Failover and failback: plan, checks, apply, report (rules in :mod:`sparkmirror.core.failover`)."""
