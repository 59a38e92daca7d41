#!/usr/bin/env bash
# The body of the torchmem pull-request action (action.yml beside it), also
# runnable by hand: compare the base branch's traces with the pull
# request's, append the Markdown answer to the job summary, write the HTML
# report, and record the gate's status as a step output. It exits 0 even
# when the gate fails: the action's last step fails on the recorded status,
# so exactly one step is red, and the summary and the report are always
# written first.
#
# Environment:
#   TORCHMEM_BASE, TORCHMEM_HEAD  base and head: a trace, a snapshot, a
#                                 summary, or a directory of them (required)
#   TORCHMEM_RULES                rules YAML (thresholds, diff.fail_if)
#   TORCHMEM_FAIL_IF              budgets, one per line ("peak_allocated>+5%")
#   TORCHMEM_REPORT               the HTML report to write (torchmem-diff.html)
#   TORCHMEM                      the torchmem binary (torchmem on PATH)
#   GITHUB_STEP_SUMMARY, GITHUB_OUTPUT  set by GitHub Actions
# Outputs (to GITHUB_OUTPUT): status (0 pass, 1 new leak or over budget,
# 2 bad input: nothing measured, which fails too) and report (its path).
set -uo pipefail

torchmem=${TORCHMEM:-torchmem}
base=${TORCHMEM_BASE:-}
head=${TORCHMEM_HEAD:-}
report=${TORCHMEM_REPORT:-torchmem-diff.html}
summary=${GITHUB_STEP_SUMMARY:-/dev/stdout}
output=${GITHUB_OUTPUT:-/dev/null}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# indent prints its input as a Markdown code block (four spaces before each
# line): file names and messages from the traces cannot become markup or
# close the block.
indent() { sed 's/^/    /'; }

status=0
args=()
for side in base head; do
  path=${!side}
  if [ -z "$path" ] || [ ! -e "$path" ]; then
    echo "torchmem: the $side traces are not there: '${path}'" >> "$work/err"
    status=2
  fi
done
if [ "$status" -eq 0 ]; then
  [ -n "${TORCHMEM_RULES:-}" ] && args+=(--rules "$TORCHMEM_RULES")
  while IFS= read -r cond; do
    cond=${cond#"${cond%%[![:space:]]*}"}
    cond=${cond%"${cond##*[![:space:]]}"}
    [ -n "$cond" ] && args+=(--fail-if "$cond")
  done <<< "${TORCHMEM_FAIL_IF:-}"
  "$torchmem" diff "$base" "$head" --format markdown -o "$report" ${args[@]+"${args[@]}"} > "$work/md" 2> "$work/err"
  status=$?
fi

{
  echo "## torchmem: GPU memory, base vs head"
  echo
  if [ -s "$work/md" ]; then
    cat "$work/md"
    echo
  fi
  if [ "$status" -ge 2 ] || { [ "$status" -ne 0 ] && [ ! -s "$work/md" ]; }; then
    echo "torchmem could not compare the runs (exit $status), so the gate fails: nothing was measured."
    echo
    indent < "$work/err"
    echo
  fi
} >> "$summary"
# Warnings (files skipped in a directory) go to the log.
cat "$work/err" >&2

echo "status=$status" >> "$output"
if [ -s "$report" ]; then
  echo "report=$report" >> "$output"
fi
exit 0
