"""Benchmarks: ``python -m benchmarks NAME [NAME ...]`` or ``python -m benchmarks all``.

A benchmark is a module ``benchmarks/<name>.py`` with ``cases()`` returning a list of ``_harness.Case``. This
package imports nothing, so that ``__main__`` can pin thread counts before NumPy loads.
"""
