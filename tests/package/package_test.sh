#!/usr/bin/env bash
# The Debian package, built and installed for real (ctest label package; CI
# runs as root):   package_test.sh SRC BUILD
#   1. cpack -G DEB makes sagad_<version>_amd64.deb;
#   2. apt-get install ./sagad_*.deb installs it with its dependencies;
#   3. the files, the conffile and the systemd unit are where they should be
#      (systemd-analyze verify on the unit);
#   4. `sagad check` accepts the installed config, and the installed sagad
#      starts (readyz 200, no example saga registered) and stops on SIGTERM;
#   5. apt-get purge removes it again.
set -euo pipefail
src=$1 build=$2
[ "$(id -u)" -eq 0 ] || { echo "needs root (apt-get install)"; exit 1; }
work=$(mktemp -d /tmp/sagad-package-XXXXXX)
cleanup() {
  kill "${PID:-}" 2>/dev/null || true
  dpkg -s sagad >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq sagad >/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
(cd "$build" && cpack -G DEB -B "$work" >/dev/null)
deb=$(ls "$work"/sagad_*_amd64.deb)
echo "built $(basename "$deb")"
dpkg-deb -f "$deb" Depends | grep -q liblmdb || { echo "no dependency on LMDB"; exit 1; }
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >/dev/null
for f in /usr/bin/sagad /usr/bin/sagactl /lib/systemd/system/sagad.service /etc/sagad/config.json; do
  [ -e "$f" ] || { echo "missing $f"; exit 1; }
done
grep -qx /etc/sagad/config.json /var/lib/dpkg/info/sagad.conffiles || { echo "config is not a conffile"; exit 1; }
for key in DynamicUser=yes StateDirectory=sagad ProtectSystem=strict NoNewPrivileges=yes; do
  grep -qx "$key" /lib/systemd/system/sagad.service || { echo "unit lacks $key"; exit 1; }
done
if systemd-analyze verify /lib/systemd/system/sagad.service 2>"$work/verify.txt"; then
  echo "systemd-analyze verify: clean"
elif grep -qiE "sagad.service:[0-9]+:" "$work/verify.txt"; then
  cat "$work/verify.txt"; echo "the unit has errors"; exit 1
else
  echo "systemd-analyze verify: no systemd here to check against ($(head -c 120 "$work/verify.txt"))"
fi
/usr/bin/sagad check --config /etc/sagad/config.json
# The installed binary, on the installed config's settings but a data dir
# and port of its own (the real /var/lib/sagad belongs to the service).
jq --arg d "$work/data" '.data_dir = $d | .listen = "127.0.0.1:0"' /etc/sagad/config.json >"$work/config.json"
/usr/bin/sagad --config "$work/config.json" >"$work/out" 2>"$work/log" &
PID=$!
source "$src/scripts/wait_port.sh"
api=http://127.0.0.1:$(wait_port "$work/out")
for _ in $(seq 100); do  # ready within 10 s
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$api/readyz")" = 200 ] && break
  sleep 0.1
done
[ "$(curl -s -o /dev/null -w '%{http_code}' "$api/readyz")" = 200 ] || { cat "$work/log"; echo "not ready"; exit 1; }
sagas=$(/usr/bin/sagactl --url "$api" --json list | jq '.instances | length')
[ "$(curl -s "$api/v1/sagas" | jq '.sagas | length')" = 0 ] || { echo "examples are on"; exit 1; }
kill -TERM "$PID"
wait "$PID" && echo "stopped on SIGTERM (exit 0)" || { echo "exit $? on SIGTERM"; cat "$work/log"; exit 1; }
PID=
echo "installed sagad: check ok, started, $sagas instances, stopped"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq sagad >/dev/null
[ ! -e /usr/bin/sagad ] || { echo "purge left /usr/bin/sagad"; exit 1; }
echo "1 passed, 0 failed"
