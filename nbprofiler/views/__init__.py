"""Bokeh figures and ipywidgets views. Views take frames (or a Profile) and never parse files."""
