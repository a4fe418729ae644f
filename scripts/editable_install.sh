# Sourced by demo.sh and test.sh, which set REPO and VENV.
#
#   install_editable <pip requirement>...   e.g.  install_editable "$REPO[test]"
#
# An editable install of this tree (the first requirement; the rest as they are), its lab extension built
# by the build hook and linked into the venv's labextensions dir.
install_editable() {
  # `labextension develop` leaves an install.json in the built extension, which the wheel's shared data
  # maps too: without this, a second install of this tree adds it twice and fails.
  rm -f "$REPO/nbprofiler/labextension/install.json"
  "$VENV/bin/python" -m pip install -q -e "$@"
  if [[ -f "$REPO/nbprofiler/labextension/package.json" ]]; then
    "$VENV/bin/jupyter" labextension develop --overwrite "$REPO" >/dev/null
  fi
}
