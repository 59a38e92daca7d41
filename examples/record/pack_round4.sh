#!/usr/bin/env bash
# Packs RESULTS_DIR into OUT as tarballs under 15 MB each (the transfer's limit is 16 MB a file):
# directories are added largest first to the first tarball with room.
set -u
R=$1 OUT=$2
cd "$R"
tar czf "$OUT/logs.tgz" logs summary.txt env.txt jobs.txt 2>/dev/null
declare -a size=(0 0 0 0 0 0 0)
for d in $(du -s --block-size=1 */ | sort -rn | awk '{print $2}' | tr -d /); do
  [ "$d" = logs ] && continue
  z=$(tar czf - "$d" | wc -c)
  for i in 0 1 2 3 4 5 6; do
    if [ $(( ${size[$i]} + z )) -lt 15000000 ]; then
      size[$i]=$(( ${size[$i]} + z )); echo "$d" >> "$OUT/.list$i"; break
    fi
  done
done
for i in 0 1 2 3 4 5 6; do
  [ -f "$OUT/.list$i" ] && tar czf "$OUT/part$i.tgz" -T "$OUT/.list$i" && rm "$OUT/.list$i"
done
ls -la "$OUT"
