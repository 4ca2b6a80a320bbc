"""Test support shipped with the package: the op table and helpers shared by tests on every device."""
