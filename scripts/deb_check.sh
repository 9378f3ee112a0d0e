#!/usr/bin/env bash
# Installs the camdnn packages on this host with dpkg and walks the operator's
# steps of docs/operations.md ("Install on a board") on them, then removes them:
#   1. dpkg -i camdnn + camdnn-onnxruntime: files, conffiles, the camdnn user and
#      groups; `systemd-analyze verify` on the installed units (with the
#      package's drop-in: /usr/local/bin/camdnnd must not exist for that to pass)
#   2. the models into /var/lib/camdnn/models; `camdnnd check-config` as user
#      camdnn loads them on tract and on ONNX Runtime (found in /usr/lib/camdnn,
#      no ORT_DYLIB_PATH)
#   3. `camdnnd profile` writes /etc/camdnn/profiles/board.toml (few runs)
#   4. /usr/bin/camdnnd serves that config as user camdnn, as the unit runs it
#      (no systemd as PID 1 here), and answers a photo from `camdnnd feed`
#   5. dpkg -r while it serves: the daemon gets SIGTERM from prerm, drains and
#      exits 0; no camdnnd process and no file of the package is left; dpkg -P
#      then removes /etc/camdnn
#
#   scripts/deb_check.sh                      # amd64 around the test build (scripts/test.sh)
#   scripts/deb_check.sh CAMDNN.deb ORT.deb   # given packages (e.g. build_deb.sh's release ones)
#
# Needs root (dpkg); holds /var/lock/camdnn-deb-check.lock so two runs on one
# host take turns. Prints what it checked; exits non-zero naming what failed.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

if [ "$(id -u)" -ne 0 ]; then
  echo "deb_check: needs root (dpkg -i); run it as root or under sudo" >&2
  exit 1
fi
exec 9>/var/lock/camdnn-deb-check.lock
flock 9
START=$(date +%s)

if [ $# -eq 2 ]; then
  CAMDNN_DEB=$1 ORT_DEB=$2
elif [ $# -eq 0 ]; then
  debs=$(scripts/build_deb.sh --arch amd64 --dev | sed -n 's/^build_deb: \(.*\.deb\) .*/\1/p')
  CAMDNN_DEB=$(echo "$debs" | grep -m1 '/camdnn_') ORT_DEB=$(echo "$debs" | grep -m1 '/camdnn-onnxruntime_')
else
  echo "usage: deb_check.sh [CAMDNN.deb ORT.deb]" >&2
  exit 2
fi

WORK=$(mktemp -d)
DAEMON=""
fail() {
  echo "deb_check: FAILED: $*" >&2
  [ -f "$WORK/log" ] && { echo "--- daemon log ---" >&2; cat "$WORK/log" >&2; }
  exit 1
}
cleanup() {
  [ -n "$DAEMON" ] && kill -9 "$DAEMON" 2>/dev/null || true
  dpkg -P camdnn camdnn-onnxruntime >/dev/null 2>&1 || true
  rm -f /var/lib/camdnn/models/{centernet,movenet-lightning,faceres}.onnx
  rmdir /var/lib/camdnn/models /var/lib/camdnn 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# dpkg_do ARGS: dpkg, waiting for another dpkg or apt on this host to finish.
dpkg_do() {
  local i
  for i in $(seq 1 120); do
    if dpkg "$@" >"$WORK/dpkg.out" 2>&1; then return 0; fi
    grep -q "lock" "$WORK/dpkg.out" || { cat "$WORK/dpkg.out" >&2; return 1; }
    sleep 1
  done
  cat "$WORK/dpkg.out" >&2
  return 1
}

# A package left by an interrupted run goes first.
dpkg_do -P camdnn camdnn-onnxruntime

echo "deb_check: 1. dpkg -i $CAMDNN_DEB $ORT_DEB"
dpkg_do -i "$CAMDNN_DEB" "$ORT_DEB" || fail "dpkg -i"
for f in /usr/bin/camdnnd /usr/lib/systemd/system/camdnnd.service /usr/lib/systemd/system/camdnnd.socket \
  /usr/lib/systemd/system/camdnnd.service.d/package.conf /etc/camdnn/camdnnd.toml \
  /etc/camdnn/profiles/board.toml /etc/camdnn/camdnnd-sim.toml /etc/camdnn/profiles/rb5.toml \
  /etc/camdnn/policies/rb5.onnx /usr/lib/camdnn/libonnxruntime.so.1.31.1 /var/lib/camdnn/models; do
  [ -e "$f" ] || fail "$f is not installed"
done
dpkg-query -W -f='${Conffiles}\n' camdnn | grep -q ' /etc/camdnn/camdnnd.toml ' ||
  fail "/etc/camdnn/camdnnd.toml is not a conffile"
getent passwd camdnn | grep -q ':/usr/sbin/nologin$' || fail "user camdnn missing or has a login shell"
getent group camdnn >/dev/null || fail "group camdnn missing"
getent group camdnn-clients >/dev/null || fail "group camdnn-clients missing"
[ ! -e /usr/local/bin/camdnnd ] || fail "/usr/local/bin/camdnnd exists: the verify below would not test the drop-in"
verify=$(systemd-analyze verify /usr/lib/systemd/system/camdnnd.service /usr/lib/systemd/system/camdnnd.socket 2>&1) ||
  fail "systemd-analyze verify: $verify"
echo "deb_check:    installed; user camdnn and groups made; systemd-analyze verify: passed${verify:+ ($verify)}"

echo "deb_check: 2. models into /var/lib/camdnn/models; check-config as user camdnn"
for m in centernet movenet-lightning faceres; do
  [ -s "models/$m.onnx" ] || fail "models/$m.onnx is missing; run scripts/setup.sh (scripts/fetch_models.sh)"
done
install -m 0644 -t /var/lib/camdnn/models models/centernet.onnx models/movenet-lightning.onnx models/faceres.onnx
as_camdnn() { (cd / && env -u ORT_DYLIB_PATH setpriv --reuid camdnn --regid camdnn --init-groups "$@"); }
as_camdnn /usr/bin/camdnnd check-config --config /etc/camdnn/camdnnd.toml >"$WORK/check" 2>&1 ||
  fail "check-config: $(cat "$WORK/check")"
grep -q "centernet on cpu-ort" "$WORK/check" && grep -q "centernet on cpu-tract" "$WORK/check" ||
  fail "check-config did not run the detector on both engines: $(cat "$WORK/check")"
sed 's/^/deb_check:    /' "$WORK/check"

echo "deb_check: 3. camdnnd profile --out /etc/camdnn/profiles/board.toml"
(cd / && env -u ORT_DYLIB_PATH /usr/bin/camdnnd profile --config /etc/camdnn/camdnnd.toml \
  --out /etc/camdnn/profiles/board.toml --runs 3 --warmup 1 --loads 1 >"$WORK/profile" 2>&1) ||
  fail "profile: $(cat "$WORK/profile")"
head -n1 /etc/camdnn/profiles/board.toml | grep -q "^# Measured by .camdnnd profile" ||
  fail "the profile was not rewritten"

echo "deb_check: 4. /usr/bin/camdnnd serve as user camdnn; feed a photo"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# The socket's folder belongs to camdnn, as /run/camdnn does under the unit's RuntimeDirectory.
install -d -o camdnn -g camdnn -m 0755 "$WORK/run"
sed -e "s|^socket = .*|socket = \"$WORK/run/camdnnd.sock\"\n\n[metrics]\nlisten = \"127.0.0.1:$port\"|" \
  -e 's|^profile = "profiles/|profile = "/etc/camdnn/profiles/|' /etc/camdnn/camdnnd.toml >"$WORK/camdnnd.toml"
chmod 0755 "$WORK" && chmod 0644 "$WORK/camdnnd.toml"
(cd / && exec env -u ORT_DYLIB_PATH setpriv --reuid camdnn --regid camdnn --init-groups \
  /usr/bin/camdnnd serve --config "$WORK/camdnnd.toml") 2>"$WORK/log" &
DAEMON=$!
for _ in $(seq 1 600); do
  kill -0 "$DAEMON" 2>/dev/null || fail "camdnnd exited early"
  curl -sf "127.0.0.1:$port/health/ready" >/dev/null 2>&1 && [ -S "$WORK/run/camdnnd.sock" ] && break
  sleep 0.2
done
curl -sf "127.0.0.1:$port/health/ready" >/dev/null || fail "camdnnd not ready after 120 s"
mkdir "$WORK/photos" && cp testdata/person.ppm "$WORK/photos/"
/usr/bin/camdnnd feed --socket "$WORK/run/camdnnd.sock" --images "$WORK/photos" --fps 0 >"$WORK/answers" 2>/dev/null ||
  fail "feed"
python3 - "$WORK/answers" <<'PY' || fail "the photo's answer: $(cat "$WORK/answers")"
import json, sys
answers = [json.loads(l) for l in open(sys.argv[1])]
assert len(answers) == 1 and answers[0]["type"] == "result", answers
classes = [o["class"] for o in answers[0]["objects"]]
assert classes.count("person") >= 1, classes
print(f"deb_check:    answered: {len(classes)} objects ({', '.join(sorted(set(map(str, classes))))})")
PY

echo "deb_check: 5. dpkg -r while camdnnd serves"
dpkg_do -r camdnn camdnn-onnxruntime || fail "dpkg -r"
for _ in $(seq 1 100); do kill -0 "$DAEMON" 2>/dev/null || break; sleep 0.2; done
if kill -0 "$DAEMON" 2>/dev/null; then fail "camdnnd still runs after dpkg -r"; fi
code=0; wait "$DAEMON" || code=$?
DAEMON=""
[ "$code" -eq 0 ] || fail "camdnnd exited $code after the package's SIGTERM (a drain exits 0)"
grep -q "shutting down" "$WORK/log" && grep -q "camdnnd stopped" "$WORK/log" ||
  fail "the daemon's log does not show a SIGTERM shutdown"
if pgrep -f '^/usr/bin/camdnnd' >/dev/null; then fail "a /usr/bin/camdnnd process is left: $(pgrep -af '^/usr/bin/camdnnd')"; fi
for f in /usr/bin/camdnnd /usr/lib/systemd/system/camdnnd.service /usr/lib/systemd/system/camdnnd.socket \
  /usr/lib/camdnn/libonnxruntime.so.1.31.1; do
  [ ! -e "$f" ] || fail "$f is left after dpkg -r"
done
[ -e /etc/camdnn/camdnnd.toml ] || fail "dpkg -r removed a conffile (only purge should)"
dpkg_do -P camdnn camdnn-onnxruntime || fail "dpkg -P"
[ ! -e /etc/camdnn ] || fail "/etc/camdnn is left after dpkg -P: $(find /etc/camdnn)"
echo "deb_check:    removed: daemon drained (exit 0), no /usr/bin/camdnnd process, files gone; purged: /etc/camdnn gone"
echo "deb_check: passed in $(($(date +%s) - START)) s"
