"""Packaged drone presets: one TOML data file per drone (see docs/presets.md)."""
