"""Parsers, one module per file family, and discovery. Never imports bokeh or ipywidgets."""
