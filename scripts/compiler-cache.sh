# Sourced by scripts/install.sh, scripts/install-test.sh and scripts/test.sh (not run): C and C++ compilations go
# through ccache when it is installed (install.sh installs it), so a fresh clone (CI's, the packaging tests' copies)
# rebuilds the generated protocol codecs (~17 MB of C, about 2 minutes of CPU) and librdkafka's test suite from
# the cache in seconds. ccache gives the compiler's own output for the same preprocessed input and flags; it only
# skips the work. Absolute paths under the checkout are hashed relative to it (CCACHE_BASEDIR), and the working
# directory is not hashed (CCACHE_NOHASHDIR: only debug info would name it), so two clones share entries.
if [ -d /usr/lib/ccache ] && command -v ccache > /dev/null; then
  case ":$PATH:" in
    *:/usr/lib/ccache:*) ;;
    *) export PATH="/usr/lib/ccache:$PATH" ;;
  esac
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}" CCACHE_NOHASHDIR=true
fi
