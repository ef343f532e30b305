# .ci/lib.sh: stages with their times, and builds in the background, for .ci/run and .ci/long.
# Sourced, not run.

ci_tmp="$(mktemp -d)"
ci_begin=$SECONDS
ci_stage=""
ci_stage_begin=$SECONDS
ci_times=()

# stage NAME starts a stage: it ends the one before, printing its time.
stage() {
	stage_end
	ci_stage="$1"
	ci_stage_begin=$SECONDS
	echo "== $ci_stage"
}

stage_end() {
	if [ -n "$ci_stage" ]; then
		local took=$((SECONDS - ci_stage_begin))
		ci_times+=("$(printf '%5ds  %s' "$took" "$ci_stage")")
		echo "ci: stage took ${took}s (${ci_stage})"
		ci_stage=""
	fi
}

# run_stage NAME FUNC runs FUNC as a stage of its own, in a subshell with errexit on: a stage that
# fails is reported and the run goes on to the next stage; stage_summary then fails the run. (A
# stage that sets variables for later ones runs in this shell, with stage.)
ci_failed=()
run_stage() {
	local name="$1" rc
	shift
	stage "$name"
	ci_bg_n=$((ci_bg_n + 1))
	set +e
	(
		set -e
		"$@"
	) 2>&1 | tee "$ci_tmp/stage-$ci_bg_n.log"
	rc=${PIPESTATUS[0]}
	set -e
	if [ "$rc" -ne 0 ]; then
		ci_failed+=("$name")
		echo "ci: stage FAILED (exit $rc): $name"
	fi
}

# start_stage NAME FUNC runs FUNC as a stage in the background (a subshell with errexit on, its
# output kept in a file) while the stages after it run; wait_stage NAME prints that output, the
# stage's time and, when it failed, reports it as run_stage does. Only stages that mostly wait (on
# containers, clusters) belong there: the foreground keeps the two cores.
declare -A ci_bg_pid=() ci_bg_begin=() ci_bg_log=()
ci_bg_n=0
start_stage() {
	local name="$1"
	shift
	ci_bg_n=$((ci_bg_n + 1))
	ci_bg_log[$name]="$ci_tmp/stage-$ci_bg_n.log"
	ci_bg_begin[$name]=$SECONDS
	echo "== $name (starts in the background)"
	(
		set -e
		"$@"
	) >"${ci_bg_log[$name]}" 2>&1 &
	ci_bg_pid[$name]=$!
}

wait_stage() {
	local name="$1" rc=0 took
	stage_end
	wait "${ci_bg_pid[$name]}" || rc=$?
	took=$((SECONDS - ci_bg_begin[$name]))
	unset "ci_bg_pid[$name]"
	echo "== $name (ran in the background)"
	cat "${ci_bg_log[$name]}"
	ci_times+=("$(printf '%5ds  %s (background)' "$took" "$name")")
	echo "ci: stage took ${took}s (${name}, in the background)"
	if [ "$rc" -ne 0 ]; then
		ci_failed+=("$name")
		echo "ci: stage FAILED (exit $rc): $name"
	fi
}

# fail_details prints, again at the end, what every failed Go test printed (the 30 lines after
# each "--- FAIL") of every stage's output: the summary of a long run shows its end.
fail_details() {
	local f
	for f in "$ci_tmp"/stage-*.log; do
		[ -e "$f" ] || continue
		if grep -qE '^[[:space:]]*--- FAIL' "$f"; then
			echo "== failures in $(basename "$f")"
			grep -E -A 30 '^[[:space:]]*--- FAIL' "$f" | grep -vE '^[[:space:]]+(/|k8s\.io|github\.com|sync\.|created by|runtime\.)' | head -200
		fi
	done
}

# stage_summary ends the last stage, prints every stage's time and the total, and fails when a
# stage failed.
stage_summary() {
	stage_end
	echo "== stage times (total $((SECONDS - ci_begin))s, $(((SECONDS - ci_begin + 30) / 60)) min)"
	printf 'ci: %s\n' "${ci_times[@]}"
	local name
	for name in "${!ci_build_took[@]}"; do
		echo "ci: background build $name took ${ci_build_took[$name]}s"
	done
	if [ "${#ci_failed[@]}" -gt 0 ]; then
		fail_details
		printf 'ci: FAILED: %s\n' "${ci_failed[@]}"
		return 1
	fi
	echo "ci: every stage passed"
}

declare -A ci_build_pid=()
declare -A ci_build_took=()

# start_build NAME CMD... runs CMD in the background at low priority, its stdout (a directory)
# and stderr kept for wait_build. Builds run one after another, in the order they were started:
# each holds a lock of its own while it runs and waits for the lock of the one before.
ci_build_last=""
start_build() {
	local name="$1" prev="$ci_build_last"
	shift
	exec 9>"$ci_tmp/$name.lock"
	flock 9
	(
		if [ -n "$prev" ]; then
			flock "$ci_tmp/$prev.lock" true
		fi
		begin=$SECONDS
		rc=0
		nice -n 15 "$@" >"$ci_tmp/$name.out" 2>"$ci_tmp/$name.log" || rc=$?
		echo "$((SECONDS - begin))" >"$ci_tmp/$name.took"
		exit "$rc"
	) &
	exec 9>&-
	ci_build_pid[$name]=$!
	ci_build_last="$name"
}

# wait_build NAME waits for a build started with start_build, prints its log, sets ci_built to
# its output (a directory), and fails the run when it failed. Not in $(...): only this shell can
# wait for the build.
wait_build() {
	local name="$1"
	if ! wait "${ci_build_pid[$name]}"; then
		echo "build $name failed:"
		cat "$ci_tmp/$name.log"
		exit 1
	fi
	cat "$ci_tmp/$name.log"
	ci_build_took[$name]="$(cat "$ci_tmp/$name.took")"
	ci_built="$(cat "$ci_tmp/$name.out")"
	echo "ci: background build $name took ${ci_build_took[$name]}s: $ci_built"
}

# summarize_cluster passes a verbose go test run of test/cluster through whole when it failed,
# else only its result lines and the upstream DNS specs' counts (the full log stays in a file).
summarize_cluster() {
	local log="$ci_tmp/cluster-$SECONDS.log"
	cat >"$log"
	if grep -qE '^(--- FAIL|FAIL)' "$log"; then
		tail -n 400 "$log"
		return 1
	fi
	grep -E '^(multinode:|zone:|clusterset:|ok|PASS)|--- (PASS|FAIL|SKIP)|upstream DNS specs|cluster up in|  (passed|skipped): ' "$log"
}

# ci_kill_tree PID ends a process and everything it started.
ci_kill_tree() {
	local c
	for c in $(pgrep -P "$1" 2>/dev/null); do
		ci_kill_tree "$c"
	done
	kill "$1" 2>/dev/null || true
}

ci_cleanup() {
	local p
	for p in "${ci_build_pid[@]}" "${ci_bg_pid[@]}"; do
		ci_kill_tree "$p"
	done
	rm -rf "$ci_tmp"
}
trap ci_cleanup EXIT
