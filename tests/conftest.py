"""Shared test settings.

The notebooks under notebooks/ are executed by nbval in the same pytest run; their kernels inherit
this process's environment, so the run budget defaults to `smoke` here (CI's budget).
"""
import os

os.environ.setdefault("BOOK_BUDGET", "smoke")
