# Test hosts in network namespaces, for tests that cross a network.
# Source this file; docs/design.md (Tests) says what they are for.
#
#   testhosts_create PREFIX COUNT   makes hosts ${PREFIX}1..COUNT, each with
#                                   an address TESTHOST_ADDR[i] on one bridge
#   testhosts_exec I CMD...         runs CMD on host I, under its own hostname
#   testhosts_destroy               kills what runs on the hosts, removes them
#
# Each call picks a subnet 10.231.N.0/24 from the shell's pid, so tests can
# run in parallel; leftovers of a killed earlier run with the same names are
# removed first.

TESTHOST_PREFIX=""
TESTHOST_COUNT=0
declare -a TESTHOST_ADDR TESTHOST_NAME TESTHOST_IF

testhosts_skip_unless_possible() {
  if [ "$(id -u)" != 0 ]; then skip_or_fail "test hosts need root"; fi
  if ! command -v ip >/dev/null; then skip_or_fail "iproute2 (ip) is not installed"; fi
  if ! ip netns add "trlprobe$$" 2>/dev/null; then
    skip_or_fail "cannot create network namespaces here"
  fi
  ip netns del "trlprobe$$"
}

testhosts_create() {
  local prefix=$1 count=$2
  TESTHOST_PREFIX=$prefix
  TESTHOST_COUNT=$count
  local subnet=$(( ($$ % 200) + 20 ))
  local bridge="${prefix}br"
  testhosts_destroy_names "$prefix" "$count"
  ip netns add "${prefix}0"  # holds the bridge: the "switch"
  ip -n "${prefix}0" link add "$bridge" type bridge
  ip -n "${prefix}0" link set "$bridge" up
  for i in $(seq 1 "$count"); do
    local ns="${prefix}${i}" host
    host=$(printf 'node%02d' "$i")
    ip netns add "$ns"
    ip link add "${prefix}h${i}" type veth peer name "${prefix}s${i}"
    ip link set "${prefix}h${i}" netns "$ns"
    ip link set "${prefix}s${i}" netns "${prefix}0"
    ip -n "${prefix}0" link set "${prefix}s${i}" master "$bridge" up
    ip -n "$ns" addr add "10.231.${subnet}.${i}/24" dev "${prefix}h${i}"
    ip -n "$ns" link set "${prefix}h${i}" up
    ip -n "$ns" link set lo up
    TESTHOST_ADDR[$i]="10.231.${subnet}.${i}"
    TESTHOST_NAME[$i]=$host
    TESTHOST_IF[$i]="${prefix}h${i}"
  done
  for i in $(seq 1 "$count"); do
    mkdir -p "/etc/netns/${prefix}${i}"
    {
      echo "127.0.0.1 localhost"
      # The classic Debian trap: the own hostname on a loopback address (a
      # launcher that trusts the hostname advertises 127.0.1.1). A
      # cluster's DNS maps it to the network address instead
      # (TESTHOSTS_OWN_NAME=network).
      if [ "${TESTHOSTS_OWN_NAME:-loopback}" = network ]; then
        echo "${TESTHOST_ADDR[$i]} ${TESTHOST_NAME[$i]}"
      else
        echo "127.0.1.1 ${TESTHOST_NAME[$i]}"
      fi
      for j in $(seq 1 "$count"); do
        [ "$j" = "$i" ] || echo "${TESTHOST_ADDR[$j]} ${TESTHOST_NAME[$j]}"
      done
    } > "/etc/netns/${prefix}${i}/hosts"
  done
}

testhosts_exec() {
  local i=$1; shift
  ip netns exec "${TESTHOST_PREFIX}${i}" unshare --uts \
    sh -c 'hostname "$0"; exec "$@"' "${TESTHOST_NAME[$i]}" "$@"
}

testhosts_pids() {
  local i=$1
  ip netns pids "${TESTHOST_PREFIX}${i}" 2>/dev/null
}

testhosts_destroy_names() {
  local prefix=$1 count=$2
  for i in $(seq 0 "$count"); do
    local ns="${prefix}${i}"
    if ip netns list | grep -qw "$ns"; then
      for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null; done
      ip netns del "$ns" 2>/dev/null
    fi
    rm -rf "/etc/netns/${ns}"
  done
}

testhosts_destroy() {
  [ -n "$TESTHOST_PREFIX" ] && testhosts_destroy_names "$TESTHOST_PREFIX" "$TESTHOST_COUNT"
  TESTHOST_PREFIX=""
}

# skip_or_fail MESSAGE: a test that cannot run skips (exit 77), saying why;
# under CI=true (root, test hosts, Slurm and PyTorch are there) that is a
# failure instead.
skip_or_fail() {
  if [ "${CI:-}" = true ]; then
    echo "FAIL: $1 (CI=true: this test must run)"; exit 1
  fi
  echo "SKIP: $1"; exit 77
}
