"""%nbprofiler magic: argument parsing, binding, help, in a real IPython shell."""
from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.testing.globalipapp import get_ipython

from nbprofiler.faces import magics
from .conftest import DATA


@pytest.fixture(scope="module")
def ip():
    shell = get_ipython()
    shell.run_line_magic("load_ext", "nbprofiler")
    return shell


def test_parse():
    a = magics.parse("'/a b/c' --device 3 --as rank3 --compare /x")
    assert (a.path, a.device, a.name, a.compare) == ("/a b/c", "3", "rank3", "/x")
    assert magics.parse("--help") is None and magics.parse("") is None
    with pytest.raises(magics.MagicUsageError):
        magics.parse("/p --as 1bad")
    with pytest.raises(magics.MagicUsageError):
        magics.parse("/p --bogus")


def test_magic_loads_and_binds(ip, capsys):
    ip.run_line_magic("nbprofiler", f"{DATA / 'legacy/run_1_widedeep'} --as wd --no-show")
    prof = ip.user_ns["wd"]
    assert len(prof.step_trace) == 322
    ip.run_line_magic("nbprofiler", f"{DATA / 'legacy/cluster_4rank_pipeline'} --device 2 --no-show")
    assert ip.user_ns["prof"].device == "2"


def test_magic_help_and_usage_error(ip, capsys):
    ip.run_line_magic("nbprofiler", "--help")
    assert "--compare PATH_B" in capsys.readouterr().out
    with pytest.raises(UsageError):
        ip.run_line_magic("nbprofiler", f"{DATA} --as class")
