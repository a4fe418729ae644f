"""The model: a run's files become a `Profile` (one device/rank) or a `Cluster` (many), whose frames are
built on first access.

- `loader`: `load(path)`, discovery's runs turned into Profiles and Clusters, sessions kept apart.
- `profile`: `Profile` and `Cluster`, the frames as properties (declared in `nbprofiler.schema`).
- `build`: which parser feeds each frame (`SOURCES`, first role the run has wins) and the frames joined
  from others (`DERIVED`).
- `derive`: those joins (the time origin, steps placed on the timeline, schedule-window repeats).
- `parallel`: the engines that build many ranks' Profiles (serial, processes, dask).
- `sql`: `prof.sql()`, DuckDB over the frames.
"""
