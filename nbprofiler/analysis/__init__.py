"""Pure analyses: DataFrames in, DataFrames (or plain dicts) out. Never reads files."""
