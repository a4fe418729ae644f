"""The faces: the ends through which nbprofiler is used, on top of every other layer.

``cli`` (the ``nbprofiler`` command), ``magics`` and ``cellprof`` (``%nbprofiler``, ``%%nbprofiler
profile``), ``report`` (the offline HTML report, ``Profile.to_html``), ``nbconvert_offline`` (``jupyter
nbconvert --to nbprofiler_offline``), ``lab`` (the Jupyter server extension behind the JupyterLab
extension) and ``testing`` (performance checks in a test suite, imported as ``nbprofiler.testing``).
Nothing is imported here: each face loads only when used.
"""
